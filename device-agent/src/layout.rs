//! Where things live in the OSPI NOR: two journal banks and two pack slots.
//!
//! ```text
//! flash offset                         size                    content
//! ------------------------------------ ----------------------- ---------------------------------------
//! start                                journal_bank_bytes      journal bank 0 (records, see journal.rs)
//! start + journal_bank_bytes           journal_bank_bytes      journal bank 1
//! start + 2·journal_bank_bytes         slot_bytes              slot A: one NPU1 pack, from its byte 0;
//!                                                              its last erase sector is slot A's descriptor
//! start + 2·journal_bank_bytes + slot  slot_bytes              slot B (the same)
//! start + 2·journal_bank_bytes + 2·slot keyring_bank_bytes      keyring bank 0 (see keystore.rs)
//! … + keyring_bank_bytes               keyring_bank_bytes      keyring bank 1
//! ```
//!
//! A slot's last erase sector is its **descriptor** (see `descriptor.rs`): what the slot holds,
//! written once it verified, so that boot can find and check the pack even when the journal is
//! lost. A pack may therefore be `slot_bytes − ERASE_SIZE` bytes long ([`Layout::pack_capacity`]).
//!
//! | rule                                             | why                                                      |
//! |--------------------------------------------------|----------------------------------------------------------|
//! | every area starts and ends on an erase boundary  | erasing one area must never touch another                |
//! | a bank holds at least two commit units (4 records) | a session writes the state as the new bank's first unit and must still have room for the next |
//! | a keyring bank holds two keyring records (1 KiB), or `keyring_bank_bytes` is 0 | a commit writes its record twice into one bank; 0: no keyring area, keyring updates live in RAM only (a layout from before the area existed, the C ABI until it carries one) |
//! | a slot is at least two erase sectors, and a sector at least 384 bytes | one for the pack, the last for the descriptor and its two marks |
//! | [`Layout::boot_check`] only on sectors of at least [`STORED_MANIFEST_SECTOR_BYTES`] (1 KiB) | the check re-verifies the manifest kept at bytes 512..1024 of the descriptor sector, which a smaller sector has no room for (descriptor.rs) |
//! | `progress_bytes` is a multiple of the erase size | a resumed download restarts on a sector it can erase without losing durable bytes |
//! | `xip_base` + a slot offset is 16-byte aligned    | the Ethos-U55 needs QBASE and every BASEPn 16-byte aligned, and a pack's stream and baked regions are 16-aligned within the pack |
//!
//! The layout is the integrator's configuration: breaking a rule is a bug in the firmware, so
//! [`Layout::check`] asserts instead of returning an error ([`Layout::validate`] returns
//! it, for a layout that comes from outside the firmware's code). The flash geometry itself (`WRITE_SIZE`,
//! `ERASE_SIZE`) is checked at compile time where it is used.
use embedded_storage::nor_flash::NorFlash;

use crate::error::LayoutError;
use crate::ids::Slot;
use crate::record::{COPIES, JOURNAL_RECORD_BYTES, KEYRING_RECORD_BYTES};

/// The smallest erase sector that keeps a slot's signed manifest beside its descriptor (bytes
/// 512..1024 of the descriptor sector, `descriptor.rs`), which [`Layout::boot_check`] needs.
pub const STORED_MANIFEST_SECTOR_BYTES: usize = 1024;

/// The flash map: offsets are from the start of the flash device as the `NorFlash` driver sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Offset of journal bank 0; bank 1 follows it.
    pub journal: u32,
    /// Size of one journal bank.
    pub journal_bank_bytes: u32,
    /// Offsets of slot A and slot B.
    pub slots: [u32; 2],
    /// Size of one slot: the largest pack this device accepts.
    pub slot_bytes: u32,
    /// A journal progress record is written each time this many more pack bytes are durable.
    pub progress_bytes: u32,
    /// The bus address at which flash offset 0 is memory-mapped (XIP): what the NPU is given.
    pub xip_base: u32,
    /// Offset of keyring bank 0; bank 1 follows it.
    pub keyring: u32,
    /// Size of one keyring bank; 0: no keyring area (updates are not persisted).
    pub keyring_bank_bytes: u32,
    /// Re-verify at boot, before the NPU is bound: the slot's stored manifest (its ed25519
    /// signature against the keyring as it stands, and that it names the journal's pack), then
    /// the pack against that manifest (SHA-256, NPU1 and its header checksum, command stream,
    /// binding). A slot that fails is skipped as a torn one is (see boot.rs). Off: boot checks
    /// the pack against the journal's SHA-256 only, as before. Needs sectors of at least
    /// [`STORED_MANIFEST_SECTOR_BYTES`].
    pub boot_check: bool,
}

impl Layout {
    /// The usual map: the two journal banks at `start`, then slot A, then slot B, then two
    /// keyring banks of the journal banks' size, back to back.
    pub const fn contiguous(
        start: u32,
        journal_bank_bytes: u32,
        slot_bytes: u32,
        progress_bytes: u32,
        xip_base: u32,
    ) -> Self {
        let slot_a = start + 2 * journal_bank_bytes;
        Self {
            journal: start,
            journal_bank_bytes,
            slots: [slot_a, slot_a + slot_bytes],
            slot_bytes,
            progress_bytes,
            xip_base,
            keyring: slot_a + 2 * slot_bytes,
            keyring_bank_bytes: journal_bank_bytes,
            boot_check: false,
        }
    }

    /// This layout with [`Layout::boot_check`] set to `on`.
    pub const fn with_boot_check(self, on: bool) -> Self {
        Self {
            boot_check: on,
            ..self
        }
    }

    /// Whether a flash of type `F` keeps each slot's signed manifest beside its descriptor:
    /// sectors of at least [`STORED_MANIFEST_SECTOR_BYTES`] (whatever [`Layout::boot_check`] says,
    /// so that the check can be turned on for packs installed before).
    pub const fn stores_manifest<F: NorFlash>(&self) -> bool {
        F::ERASE_SIZE >= STORED_MANIFEST_SECTOR_BYTES
    }

    /// Whether the layout has a keyring area.
    pub const fn has_keyring(&self) -> bool {
        self.keyring_bank_bytes != 0
    }

    /// Flash offset of keyring bank `bank` (0 or 1).
    pub const fn keyring_bank(&self, bank: usize) -> u32 {
        self.keyring + bank as u32 * self.keyring_bank_bytes
    }

    /// Flash offset of journal bank `bank` (0 or 1).
    pub const fn bank(&self, bank: usize) -> u32 {
        self.journal + bank as u32 * self.journal_bank_bytes
    }

    /// Flash offset of `slot`'s first byte.
    pub const fn slot(&self, slot: Slot) -> u32 {
        self.slots[slot.index()]
    }

    /// The largest pack a slot holds on a flash of type `F`: the slot less its descriptor sector.
    pub const fn pack_capacity<F: NorFlash>(&self) -> u32 {
        self.slot_bytes - F::ERASE_SIZE as u32
    }

    /// Flash offset of `slot`'s descriptor sector on a flash of type `F` (its last sector).
    pub const fn descriptor<F: NorFlash>(&self, slot: Slot) -> u32 {
        self.slot(slot) + self.pack_capacity::<F>()
    }

    /// Bus address of `slot`'s first byte in the XIP window.
    pub const fn slot_xip(&self, slot: Slot) -> u32 {
        self.xip_base + self.slot(slot)
    }

    /// Offset just past the last byte the layout uses.
    pub const fn end(&self) -> u64 {
        let mut end = self.journal as u64 + 2 * self.journal_bank_bytes as u64;
        let mut i = 0;
        while i < 2 {
            let e = self.slots[i] as u64 + self.slot_bytes as u64;
            if e > end {
                end = e;
            }
            i += 1;
        }
        if self.has_keyring() {
            let e = self.keyring as u64 + 2 * self.keyring_bank_bytes as u64;
            if e > end {
                end = e;
            }
        }
        end
    }

    /// Asserts that the layout fits a flash of type `F` with `capacity` bytes (see the module's
    /// table). A failure is a configuration bug, never a runtime condition.
    pub fn check<F: NorFlash>(&self, capacity: usize) {
        if let Err(e) = self.validate::<F>(capacity) {
            panic!("{e}");
        }
    }

    /// The rules of the module's table, checked for a flash of type `F` with `capacity` bytes:
    /// the first one broken. For a layout that comes from outside the firmware's own code (the C
    /// ABI's caller), where [`Layout::check`] would panic.
    pub fn validate<F: NorFlash>(&self, capacity: usize) -> Result<(), LayoutError> {
        let erase = F::ERASE_SIZE as u64;
        let areas = [
            (
                self.journal as u64,
                2 * self.journal_bank_bytes as u64,
                "journal",
            ),
            (self.slots[0] as u64, self.slot_bytes as u64, "slot A"),
            (self.slots[1] as u64, self.slot_bytes as u64, "slot B"),
            (
                self.keyring as u64,
                2 * self.keyring_bank_bytes as u64,
                "keyring",
            ),
        ];
        let areas = if self.has_keyring() {
            &areas[..]
        } else {
            &areas[..3]
        };
        for (i, &(start, len, area)) in areas.iter().enumerate() {
            if len == 0 {
                return Err(LayoutError::Empty { area });
            }
            if start % erase != 0 || len % erase != 0 {
                return Err(LayoutError::Unaligned {
                    area,
                    start,
                    len,
                    erase,
                });
            }
            for &(s2, l2, other) in &areas[i + 1..] {
                if !(start + len <= s2 || s2 + l2 <= start) {
                    return Err(LayoutError::Overlap { area, other });
                }
            }
        }
        if self.journal_bank_bytes as u64 % erase != 0 {
            return Err(LayoutError::Unaligned {
                area: "journal bank",
                start: self.journal as u64,
                len: self.journal_bank_bytes as u64,
                erase,
            });
        }
        if (self.journal_bank_bytes as usize) < 2 * COPIES * JOURNAL_RECORD_BYTES {
            return Err(LayoutError::BankTooSmall {
                bytes: self.journal_bank_bytes,
                min: 2 * COPIES * JOURNAL_RECORD_BYTES,
            });
        }
        if self.has_keyring()
            && (self.keyring_bank_bytes as u64 % erase != 0
                || (self.keyring_bank_bytes as usize) < 2 * KEYRING_RECORD_BYTES)
        {
            return Err(LayoutError::KeyringBankTooSmall {
                bytes: self.keyring_bank_bytes,
                min: 2 * KEYRING_RECORD_BYTES,
                erase,
            });
        }
        if (self.slot_bytes as u64) < 2 * erase || erase < 3 * 128 {
            return Err(LayoutError::SlotTooSmall {
                bytes: self.slot_bytes,
                erase,
            });
        }
        if self.boot_check && !self.stores_manifest::<F>() {
            return Err(LayoutError::BootCheckSectorTooSmall {
                erase,
                min: STORED_MANIFEST_SECTOR_BYTES,
            });
        }
        if self.progress_bytes == 0 || self.progress_bytes as u64 % erase != 0 {
            return Err(LayoutError::Progress {
                bytes: self.progress_bytes,
                erase,
            });
        }
        if self.end() > capacity as u64 {
            return Err(LayoutError::PastCapacity {
                end: self.end(),
                capacity: capacity as u64,
            });
        }
        for slot in Slot::ALL {
            let xip = self.xip_base as u64 + self.slot(slot) as u64 + self.slot_bytes as u64;
            if xip > 1 << 32 {
                return Err(LayoutError::PastBus { slot });
            }
            if self.slot_xip(slot) % npub_core::format::ARENA_ALIGN != 0 {
                return Err(LayoutError::SlotMisaligned {
                    slot,
                    address: self.slot_xip(slot),
                });
            }
        }
        Ok(())
    }
}
