-- A maintenance window may be limited to days of the week: `days` is a bit set, bit 0 Monday to
-- bit 6 Sunday, of the local days on which the window OPENS (one that runs over midnight closes
-- on the next day). 127, every day, is what every window before this column meant.
ALTER TABLE group_windows ADD COLUMN days INTEGER NOT NULL DEFAULT 127 CHECK (days > 0 AND days < 128);
