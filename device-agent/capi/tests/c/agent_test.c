/* The shared checks (see agent_test.h). */
#include <stdio.h>
#include <string.h>

#include "agent_test.h"

static uint8_t flash_mem[TEST_FLASH_BYTES] __attribute__((aligned(16)));
static uint8_t snapshot[TEST_FLASH_BYTES];
static uint8_t arena_mem[TEST_ARENA_BYTES] __attribute__((aligned(16)));
static npub_agent agent_storage;

/* ---- the RAM NOR ---- */

static int nor_power(ram_nor *n) {
  if (n->dead) return 0;
  n->ops++;
  if (n->cut_at != 0 && n->ops >= n->cut_at) {
    n->dead = 1;
    return 0;
  }
  return 1;
}

static int32_t nor_program(void *ctx, uint32_t offset, const uint8_t *data, uint32_t len) {
  ram_nor *n = ctx;
  if (offset % NPUB_FLASH_WRITE_BYTES || len % NPUB_FLASH_WRITE_BYTES || len > 512 ||
      offset + len > TEST_FLASH_BYTES)
    return -3;
  if (!nor_power(n)) return -1;
  if (!n->busy) n->unannounced++;
  for (uint32_t i = 0; i < len; i++) n->mem[offset + i] &= data[i]; /* NOR: only clears bits */
  return 0;
}

static int32_t nor_erase(void *ctx, uint32_t offset, uint32_t len) {
  ram_nor *n = ctx;
  if (offset % NPUB_FLASH_ERASE_BYTES || len % NPUB_FLASH_ERASE_BYTES ||
      offset + len > TEST_FLASH_BYTES)
    return -3;
  if (!nor_power(n)) return -1;
  if (!n->busy) n->unannounced++;
  memset(n->mem + offset, 0xFF, len);
  return 0;
}

/* The firmware's flash_busy hook as an RA8P1 would wire it: on NPUB_FLASH_ERASING or
 * NPUB_FLASH_PROGRAMMING, wait for the NPU job reading the weights and leave memory-mapped mode;
 * on NPUB_FLASH_IDLE, re-enter it and let inference run. Here it marks the RAM NOR busy, and the
 * NOR counts every operation that came without it. */
static long fed;
static void feed_watchdog(void *ctx) {
  (void)ctx;
  fed++;
}

static void nor_busy(void *ctx, uint32_t state, uint32_t offset, uint32_t len) {
  ram_nor *n = ctx;
  (void)offset;
  if (state == NPUB_FLASH_IDLE) {
    if (!n->busy) n->bad_windows++;
    n->busy = 0;
    n->windows++;
    return;
  }
  if (n->busy || (state == NPUB_FLASH_ERASING && len != 4096) ||
      (state == NPUB_FLASH_PROGRAMMING && len > 512))
    n->bad_windows++;
  n->busy = 1;
}

/* ---- a monotonic counter (an OTP counter's stand-in: it only goes up) ---- */

typedef struct {
  uint64_t value;
  int garbage; /* read returns this positive value instead of 0 (0: behave) */
} ram_counter;

static int32_t counter_read(void *ctx, uint64_t *value) {
  ram_counter *k = ctx;
  if (k->garbage) return k->garbage;
  *value = k->value;
  return 0;
}

static int32_t counter_raise(void *ctx, uint64_t value) {
  ram_counter *k = ctx;
  if (value > k->value) k->value = value;
  return 0;
}

/* ---- the in-memory server ---- */

static int32_t mem_fetch_manifest(void *ctx, uint64_t after, uint8_t *buf, size_t cap, size_t *len,
                                  uint64_t *keyring_sequence) {
  mem_server *s = ctx;
  *keyring_sequence = s->keyring_sequence;
  if (s->reenter) s->reenter_rc = npub_agent_poll((npub_agent *)s->reenter, NULL);
  if (s->manifest == NULL || (s->sequence <= after && !s->stale)) return NPUB_NO_MANIFEST;
  memcpy(buf, s->manifest, s->manifest_len < cap ? s->manifest_len : cap);
  *len = s->manifest_len;
  return NPUB_MANIFEST;
}

static int32_t mem_fetch_pack(void *ctx, const uint8_t *sha256, uint32_t offset, uint8_t *buf, size_t len) {
  mem_server *s = ctx;
  (void)sha256;
  s->fetches++;
  if (s->garbage_at && s->fetches == s->garbage_at) return (int32_t)len + 1000;
  if (s->io_error_at && s->fetches == s->io_error_at) return NPUB_IO_ERROR;
  if (offset >= s->pack_len) return 0;
  size_t n = s->pack_len - offset < len ? s->pack_len - offset : len;
  memcpy(buf, s->pack + offset, n);
  if (s->corrupt_at && s->fetches == s->corrupt_at) buf[n / 2] ^= 0x01;
  return (int32_t)n;
}

static int32_t mem_fetch_selftest(void *ctx, const uint8_t *sha256, uint32_t offset, uint8_t *buf, size_t len) {
  mem_server *s = ctx;
  (void)sha256;
  if (s->selftest == NULL) return -404;
  if (offset >= s->selftest_len) return 0;
  size_t n = s->selftest_len - offset < len ? s->selftest_len - offset : len;
  memcpy(buf, s->selftest + offset, n);
  return (int32_t)n;
}

/* Record n has sequence n (the server numbers them from 1), so `after` records are skipped. */
static int32_t mem_fetch_keyring_updates(void *ctx, uint64_t after, uint8_t *buf, size_t cap) {
  mem_server *s = ctx;
  size_t from = (size_t)after * NPUB_KEYRING_UPDATE_BYTES;
  if (from >= s->records_len) return 0;
  size_t n = s->records_len - from;
  if (n > cap) n = cap - cap % NPUB_KEYRING_UPDATE_BYTES;
  memcpy(buf, s->records + from, n);
  return (int32_t)n;
}

static int32_t mem_report(void *ctx, const npub_report *r) {
  mem_server *s = ctx;
  s->reports++;
  snprintf(s->last_state, sizeof s->last_state, "%s", r->state);
  s->last_attempts = r->attempts;
  snprintf(s->last_events, sizeof s->last_events, "%s", r->events ? r->events : "");
  snprintf(s->last_reason, sizeof s->last_reason, "%s", r->reason ? r->reason : "");
  s->last_event_count = r->event_count;
  return 0;
}

static void serve(mem_server *s, int which) {
  memset(s, 0, sizeof *s);
  if (which == 1) {
    s->manifest = npub_test_manifest1, s->manifest_len = npub_test_manifest1_len;
    s->pack = npub_test_pack1, s->pack_len = npub_test_pack1_len, s->sequence = npub_test_seq1;
    s->selftest = npub_test_selftest1, s->selftest_len = npub_test_selftest1_len;
  } else if (which == 2) {
    s->manifest = npub_test_manifest2, s->manifest_len = npub_test_manifest2_len;
    s->pack = npub_test_pack2, s->pack_len = npub_test_pack2_len, s->sequence = npub_test_seq2;
    s->selftest = npub_test_selftest2, s->selftest_len = npub_test_selftest2_len;
  } else {
    s->manifest = npub_test_manifest3, s->manifest_len = npub_test_manifest3_len;
    s->pack = npub_test_pack2, s->pack_len = npub_test_pack2_len, s->sequence = npub_test_seq3;
    s->selftest = npub_test_selftest2, s->selftest_len = npub_test_selftest2_len;
    s->keyring_sequence = npub_test_keyring_sequence;
    s->records = npub_test_keyring_records, s->records_len = npub_test_keyring_records_len;
  }
}

void test_config(npub_config *c, ram_nor *nor, uint8_t *arena, mem_server *server) {
  memset(c, 0, sizeof *c);
  c->flash.ctx = nor;
  c->flash.xip = nor->mem;
  c->flash.xip_bus_address = TEST_XIP_BUS;
  c->flash.capacity = TEST_FLASH_BYTES;
  c->flash.program_unit = 4;
  c->flash.erase_unit = 4096;
  c->flash.program = nor_program;
  c->flash.erase = nor_erase;
  c->layout.journal_offset = 0;
  c->layout.journal_bank_bytes = TEST_BANK_BYTES;
  c->layout.slot_offset[0] = 2 * TEST_BANK_BYTES;
  c->layout.slot_offset[1] = 2 * TEST_BANK_BYTES + TEST_SLOT_BYTES;
  c->layout.slot_bytes = TEST_SLOT_BYTES;
  c->layout.progress_bytes = 16 * 1024;
  c->layout.keyring_offset = TEST_KEYRING_OFFSET;
  c->layout.keyring_bank_bytes = TEST_BANK_BYTES;
  /* Every scenario (installs, a failed self-test, a power cut at every flash operation of an
   * upgrade) boots with the boot check: the slot's stored manifest verified again. */
  c->layout.boot_check = 1;
  c->transport = NPUB_TRANSPORT_REQUESTS;
  c->requests.ctx = server;
  c->requests.fetch_manifest = mem_fetch_manifest;
  c->requests.fetch_pack = mem_fetch_pack;
  c->requests.report = mem_report;
  c->requests.fetch_keyring_updates = mem_fetch_keyring_updates;
  c->requests.fetch_selftest = mem_fetch_selftest;
  c->clock.now_ms = test_now_ms;
  c->clock.sleep_ms = test_sleep_ms;
  c->trusted_keys = (const uint8_t(*)[32])npub_test_key;
  c->trusted_key_count = 1;
  c->root_keys = (const uint8_t(*)[32])npub_test_root;
  c->root_key_count = 1;
  c->hw_class = npub_test_hw_class;
  c->accel = NPUB_ACCEL_U55_256;
  c->arena = arena;
  c->arena_bytes = TEST_ARENA_BYTES;
  c->arena_bus_address = TEST_ARENA_BUS;
  c->step_bytes = 8192;
}

int32_t test_install(npub_agent *agent, npub_job *job) {
  for (int steps = 0; steps < 10000; steps++) {
    int32_t rc = npub_agent_poll(agent, job);
    if (rc == NPUB_IN_PROGRESS) continue;
    if (rc == NPUB_PENDING) {
      /* The application's self-test would run an inference on `job` here. */
      return npub_agent_confirm(agent, 0, job);
    }
    return rc;
  }
  return -1000;
}

void test_print_job(const char *what, const npub_job *job) {
  printf("%s: slot %c sequence %llu, %u bytes; QBASE 0x%08lx QSIZE %lu; driver payload %s (%d bytes); "
         "%d base addresses:",
         what, job->slot ? 'B' : 'A', (unsigned long long)job->sequence, (unsigned)job->pack_bytes,
         (unsigned long)job->qbase, (unsigned long)job->qsize,
         job->driver_payload ? "in the arena" : "none", job->driver_payload_bytes, job->num_base_addr);
  for (int i = 0; i < job->num_base_addr; i++)
    printf(" [%d] 0x%08llx+%lu%s", i, (unsigned long long)job->base_addr[i],
           (unsigned long)job->base_addr_size[i], (job->baked_mask >> i) & 1 ? " (flash)" : "");
  printf("\n");
}

/* What Arm's driver checks of its payload, from the job alone: "COP1", records up to a stream
 * tag whose stream is the job's QBASE/QSIZE, 16-byte aligned, ending the payload. */
static int driver_would_accept(const npub_job *job) {
  const uint8_t *p = job->driver_payload;
  if (p == NULL || job->driver_payload_bytes < 4 || job->driver_payload_bytes % 4) return 0;
  uint32_t w;
  memcpy(&w, p, 4);
  if (w != NPUB_COP1_MAGIC) return 0;
  for (int at = 4; at < job->driver_payload_bytes;) {
    memcpy(&w, p + at, 4);
    switch (w & 0xFF) {
      case 1: at += 12; break;
      case 5: at += 4; break;
      case 2: {
        uint32_t words = ((w >> 8) & 0xFF) << 16 | (w >> 16);
        const uint8_t *stream = p + at + 4;
        return stream == job->command_stream && words * 4 == job->qsize &&
               ((uintptr_t)stream & 15) == 0 && at + 4 + (int)(words * 4) == job->driver_payload_bytes;
      }
      default: return 0;
    }
  }
  return 0;
}

static int check_job(const npub_job *job, uint64_t sequence, const uint8_t *pack, size_t pack_len) {
  int failures = 0;
  CHECK(job->sequence == sequence, "sequence %llu", (unsigned long long)job->sequence);
  CHECK(job->pack_bytes == pack_len, "pack_bytes %u", (unsigned)job->pack_bytes);
  CHECK(driver_would_accept(job), "the driver payload is not what ethosu_invoke_v3 walks");
  CHECK(job->num_base_addr >= 1 && (job->baked_mask & 1), "region 0 is the baked weights");
  for (int i = 0; i < job->num_base_addr; i++)
    CHECK(job->base_addr[i] % NPUB_NPU1_ARENA_ALIGN == 0, "BASEP%d unaligned", i);
  /* The program runs from SRAM: the stream and the payload are copies of the pack's own bytes,
   * at the arena's end, QBASE on the arena's bus addresses. */
  uint32_t cmd_offset;
  memcpy(&cmd_offset, pack + 16, 4);
  CHECK(memcmp(job->command_stream, pack + cmd_offset, job->qsize) == 0, "stream bytes");
  CHECK(job->command_stream >= arena_mem && job->command_stream + job->qsize <= arena_mem + TEST_ARENA_BYTES,
        "the stream is not in the arena");
  CHECK(job->qbase >= TEST_ARENA_BUS && job->qbase + job->qsize <= TEST_ARENA_BUS + TEST_ARENA_BYTES,
        "QBASE 0x%08lx is not in the arena", (unsigned long)job->qbase);
  CHECK(job->qbase - TEST_ARENA_BUS == (uint32_t)(job->command_stream - arena_mem), "QBASE is not the stream's copy");
  const uint8_t *payload = job->driver_payload;
  CHECK(payload != NULL && memcmp(payload, pack + cmd_offset - (job->command_stream - payload),
                                  (size_t)job->driver_payload_bytes) == 0,
        "driver payload bytes");
  return failures;
}

static int32_t open_agent(npub_config *c) {
  return npub_agent_open(&agent_storage, sizeof agent_storage, c);
}

static int last_error_has(const char *needle) {
  char msg[512];
  npub_agent_last_error(&agent_storage, msg, sizeof msg);
  if (strstr(msg, needle) == NULL) {
    printf("  message: %s\n", msg);
    return 0;
  }
  return 1;
}

/* One scenario's device and server: the flash as `snapshot` holds it (pack 1 installed and
 * confirmed), the in-memory server offering version `which`, a config over both. The config
 * points into the scene: keep it in place. */
typedef struct {
  ram_nor nor;
  mem_server server;
  npub_config c;
  npub_job job;
} scene;

static void scene_setup(scene *s, int which) {
  memcpy(flash_mem, snapshot, sizeof flash_mem);
  s->nor = (ram_nor){.mem = flash_mem};
  serve(&s->server, which);
  test_config(&s->c, &s->nor, arena_mem, &s->server);
}

/* The agent opened on the scene's config and booted to a bound pack: 0 when either failed. */
static int scene_open_boot(scene *s) {
  return open_agent(&s->c) == NPUB_OK && npub_agent_boot(&agent_storage, &s->job) == NPUB_OK;
}

/* scene_setup, then scene_open_boot (pack 1 bound). */
static int scene_boot(scene *s, int which) {
  scene_setup(s, which);
  return scene_open_boot(s);
}

/* Polls until the download is over: NPUB_PENDING, or what stopped it. */
static int32_t poll_through(npub_job *job) {
  int32_t rc;
  while ((rc = npub_agent_poll(&agent_storage, job)) == NPUB_IN_PROGRESS) {
  }
  return rc;
}

/* ---- the checks ---- */

/* A stream whose server is never reached (the scheme checks of bad_calls). */
static int32_t refused_connect(void *ctx, const char *host, size_t host_len, uint16_t port, uint32_t timeout_ms) {
  (void)ctx, (void)host, (void)host_len, (void)port, (void)timeout_ms;
  return NPUB_IO_ERROR;
}
static int32_t refused_read(void *ctx, uint8_t *buf, size_t len) {
  (void)ctx, (void)buf, (void)len;
  return NPUB_IO_ERROR;
}
static int32_t refused_write(void *ctx, const uint8_t *buf, size_t len) {
  (void)ctx, (void)buf, (void)len;
  return NPUB_IO_ERROR;
}
static void refused_close(void *ctx) { (void)ctx; }

static int bad_calls(void) {
  int failures = 0;
  ram_nor nor = {.mem = flash_mem};
  mem_server server;
  npub_config c;
  npub_job job;
  char msg[256];
  static uint64_t small[16];
  memset(flash_mem, 0xFF, sizeof flash_mem);
  serve(&server, 1);
  test_config(&c, &nor, arena_mem, &server);

  CHECK(npub_agent_abi_ok() == NPUB_OK, "header and library disagree on the ABI");
  CHECK(npub_agent_storage_bytes() <= sizeof(npub_agent), "storage constant too small");
  CHECK(npub_agent_open(NULL, sizeof agent_storage, &c) == NPUB_E_NULL, "NULL agent");
  CHECK(npub_agent_open((npub_agent *)small, sizeof small, &c) == NPUB_E_STORAGE, "small storage");
  CHECK(npub_agent_open((npub_agent *)((char *)&agent_storage + 4), sizeof agent_storage - 4, &c) ==
            NPUB_E_ALIGN, "misaligned storage");
  CHECK(open_agent(NULL) == NPUB_E_NULL, "NULL config");
  memset(&agent_storage, 0, sizeof agent_storage);
  CHECK(npub_agent_poll(&agent_storage, &job) == NPUB_E_NOT_OPEN, "never opened");
  CHECK(npub_agent_last_error(&agent_storage, msg, sizeof msg) == NPUB_E_NOT_OPEN && strstr(msg, "no open agent"),
        "%s", msg);
  CHECK(npub_agent_poll(NULL, &job) == NPUB_E_NULL, "NULL to poll");
  CHECK(npub_agent_last_error(NULL, msg, sizeof msg) == NPUB_E_NULL, "NULL to last_error");

  c.flash.program = NULL;
  CHECK(open_agent(&c) == NPUB_E_CONFIG && last_error_has("config.flash.program is NULL"), "program NULL");
  c.flash.program = nor_program;
  c.layout.slot_offset[1] += 16;
  CHECK(open_agent(&c) == NPUB_E_CONFIG && last_error_has("slot B") && last_error_has("erase size"),
        "unaligned slot");
  c.layout.slot_offset[1] -= 16;
  c.flash.erase_unit = 3000;
  CHECK(open_agent(&c) == NPUB_E_CONFIG && last_error_has("flash.erase_unit"), "erase unit");
  c.flash.erase_unit = 4096;
  c.trusted_key_count = 9;
  CHECK(open_agent(&c) == NPUB_E_CONFIG && last_error_has("trusted_key_count"), "key count");
  c.trusted_key_count = 1;
  c.root_key_count = 3;
  CHECK(open_agent(&c) == NPUB_E_CONFIG && last_error_has("root_key_count"), "root key count");
  c.root_key_count = 1;
  c.root_keys = NULL;
  CHECK(open_agent(&c) == NPUB_E_CONFIG && last_error_has("config.root_keys is NULL"), "root keys NULL");
  c.root_keys = (const uint8_t(*)[32])npub_test_root;
  c.layout.keyring_bank_bytes = 0;
  CHECK(open_agent(&c) == NPUB_E_CONFIG && last_error_has("layout.keyring_bank_bytes"), "no keyring area");
  c.layout.keyring_bank_bytes = TEST_BANK_BYTES;
  c.layout.keyring_offset = TEST_KEYRING_OFFSET - 4096;
  CHECK(open_agent(&c) == NPUB_E_CONFIG && last_error_has("keyring"), "keyring over slot B");
  c.layout.keyring_offset = TEST_KEYRING_OFFSET;
  c.layout.boot_check = 2;
  CHECK(open_agent(&c) == NPUB_E_CONFIG && last_error_has("layout.boot_check"), "boot_check not 0 or 1");
  c.layout.boot_check = 1;
  c.arena = arena_mem + 4;
  CHECK(open_agent(&c) == NPUB_E_CONFIG && last_error_has("16-byte aligned"), "arena alignment");
  c.arena = arena_mem;
  c.transport = 7;
  CHECK(open_agent(&c) == NPUB_E_CONFIG && last_error_has("config.transport"), "transport kind");
  c.transport = NPUB_TRANSPORT_REQUESTS;
  /* A message never overruns its buffer, and is NUL-terminated when cut. */
  memset(msg, 'x', sizeof msg);
  npub_agent_last_error(&agent_storage, msg, 8);
  CHECK(msg[7] == '\0' && msg[8] == 'x', "truncation");
  {
    /* TLS is the firmware's stream's: an https:// server needs NPUB_TRANSPORT_TLS_STREAM (its
     * connect does the handshake), and that transport takes https:// only. */
    npub_stream plain = c.stream;
    c.stream.ctx = NULL;
    c.stream.token = "t0k3n";
    c.stream.connect = refused_connect;
    c.stream.read = refused_read;
    c.stream.write = refused_write;
    c.stream.close = refused_close;
    c.transport = NPUB_TRANSPORT_STREAM;
    c.stream.server_url = "https://127.0.0.1:8443";
    CHECK(open_agent(&c) == NPUB_E_CONFIG && last_error_has("needs NPUB_TRANSPORT_TLS_STREAM"),
          "https:// over a plain stream");
    c.transport = NPUB_TRANSPORT_TLS_STREAM;
    c.stream.server_url = "http://127.0.0.1:8080";
    CHECK(open_agent(&c) == NPUB_E_CONFIG && last_error_has("needs an https://"), "http:// over a TLS stream");
    c.stream.server_url = "https://127.0.0.1:8443";
    CHECK(open_agent(&c) == NPUB_OK, "https:// over a TLS stream");
    c.stream = plain;
    c.transport = NPUB_TRANSPORT_REQUESTS;
  }

  /* Out of order. */
  CHECK(open_agent(&c) == NPUB_OK, "open");
  CHECK(npub_agent_poll(&agent_storage, &job) == NPUB_E_ORDER && last_error_has("npub_agent_boot first"),
        "poll before boot");
  CHECK(npub_agent_confirm(&agent_storage, 0, &job) == NPUB_E_ORDER, "confirm before boot");
  CHECK(npub_agent_boot(&agent_storage, &job) == NPUB_E_NO_PACK, "a blank flash binds nothing");
  CHECK(npub_agent_job(&agent_storage, &job) == NPUB_E_NOT_BOUND, "nothing bound");
  CHECK(npub_agent_boot(&agent_storage, &job) == NPUB_E_ORDER, "boot twice");
  CHECK(npub_agent_confirm(&agent_storage, 0, &job) == NPUB_E_ORDER, "confirm with nothing pending");

  /* A callback calling back into the agent is refused, not run. */
  server.reenter = &agent_storage;
  CHECK(npub_agent_poll(&agent_storage, &job) == NPUB_IN_PROGRESS, "poll");
  CHECK(server.reenter_rc == NPUB_E_BUSY, "re-entered poll: %d", (int)server.reenter_rc);
  server.reenter = NULL;

  /* A fetch_pack that claims more than its buffer. */
  server.garbage_at = server.fetches + 1;
  int32_t rc;
  while ((rc = npub_agent_poll(&agent_storage, &job)) == NPUB_IN_PROGRESS) {
  }
  CHECK(rc == NPUB_E_CALLBACK && last_error_has("requests.fetch_pack returned"), "garbage length: %s",
        npub_result_name(rc));
  /* The next poll resumes and installs. */
  server.garbage_at = 0;
  CHECK(test_install(&agent_storage, &job) == NPUB_OK, "install after garbage");
  failures += check_job(&job, npub_test_seq1, npub_test_pack1, npub_test_pack1_len);
  npub_agent_close(&agent_storage);
  CHECK(npub_agent_poll(&agent_storage, &job) == NPUB_E_NOT_OPEN, "closed");
  printf("bad calls: %d failures\n", failures);
  return failures;
}

/* A self-test that fails gives the new pack up and binds the previous one, and reports it
 * `rolled_back` with the event log: the agent's lines and the firmware's own (a line the server
 * would refuse is refused here, and the log keeps nothing of it). */
static int self_test_failure(void) {
  scene s;
  int failures = 0;
  char line[NPUB_MAX_EVENT_CHARS + 2];
  scene_setup(&s, 2);
  CHECK(open_agent(&s.c) == NPUB_OK, "open");
  CHECK(npub_agent_record_event(&agent_storage, "app: power-on, sensor 3 warm") == NPUB_OK, "before boot");
  CHECK(npub_agent_boot(&agent_storage, &s.job) == NPUB_OK, "boot v1");
  memset(line, 'x', sizeof line);
  line[NPUB_MAX_EVENT_CHARS + 1] = '\0';
  CHECK(npub_agent_record_event(&agent_storage, line) == NPUB_E_EVENT && last_error_has("65 bytes, at most 64"),
        "a line of 65 characters");
  line[NPUB_MAX_EVENT_CHARS] = '\0';
  CHECK(npub_agent_record_event(&agent_storage, line) == NPUB_OK, "a line of 64 characters");
  CHECK(npub_agent_record_event(&agent_storage, "two\nlines") == NPUB_E_EVENT &&
            last_error_has("byte 3 is not printable ASCII"),
        "a line break");
  CHECK(npub_agent_record_event(&agent_storage, "caf\xc3\xa9") == NPUB_E_EVENT, "a UTF-8 character");
  CHECK(npub_agent_record_event(&agent_storage, NULL) == NPUB_E_NULL, "NULL line");
  CHECK(npub_agent_record_event(&agent_storage, "app: camera up") == NPUB_OK, "app line");
  int32_t rc;
  rc = poll_through(&s.job);
  CHECK(rc == NPUB_PENDING && s.job.sequence == npub_test_seq2, "v2 pending");
  CHECK(npub_agent_poll(&agent_storage, &s.job) == NPUB_E_ORDER, "poll while pending");
  CHECK(npub_agent_confirm(&agent_storage, 42, &s.job) == NPUB_E_SELF_TEST && last_error_has("code 42"),
        "failed self-test");
  CHECK(s.job.sequence == npub_test_seq1, "v1 bound again: %llu", (unsigned long long)s.job.sequence);
  char want[96];
  CHECK(strcmp(s.server.last_state, "rolled_back") == 0, "reported %s", s.server.last_state);
  CHECK(strstr(s.server.last_events, "app: power-on, sensor 3 warm\n") != NULL, "%s", s.server.last_events);
  CHECK(strstr(s.server.last_events, "\napp: camera up\n") != NULL, "%s", s.server.last_events);
  snprintf(want, sizeof want, "\ndownload started seq %llu\n", (unsigned long long)npub_test_seq2);
  CHECK(strstr(s.server.last_events, want) != NULL, "%s", s.server.last_events);
  snprintf(want, sizeof want, "\ninstall pending seq %llu\n", (unsigned long long)npub_test_seq2);
  CHECK(strstr(s.server.last_events, want) != NULL, "%s", s.server.last_events);
  snprintf(want, sizeof want, "\nself-test failed, reverted seq %llu\n", (unsigned long long)npub_test_seq2);
  CHECK(strstr(s.server.last_events, want) != NULL, "the last line: %s", s.server.last_events);
  CHECK(strstr(s.server.last_events, "two") == NULL && strstr(s.server.last_events, "caf") == NULL,
        "a refused line was kept: %s", s.server.last_events);
  {
    uint32_t newlines = 0;
    for (const char *p = s.server.last_events; *p; p++) newlines += *p == '\n';
    CHECK(newlines == s.server.last_event_count && newlines <= NPUB_MAX_EVENT_LINES, "%u lines, count %u",
          (unsigned)newlines, (unsigned)s.server.last_event_count);
  }
  printf("self-test failure: %d failures\n", failures);
  return failures;
}

/* Transient faults during the upgrade to pack 2: a broken connection keeps the durable bytes
 * (npub_agent_status says how many) and the next poll resumes; a download corrupted on the way
 * is NPUB_E_INTEGRITY (the slot's SHA-256 is not the signed one), reported `downloading` with
 * attempts 1, and the next poll downloads it afresh and installs it. */
static int transient_faults(void) {
  scene s;
  int failures = 0;
  npub_status st;
  CHECK(scene_boot(&s, 2), "boot v1");
  /* Far enough in for a durable mark (progress_bytes is 16 KiB, a fetch at most 512 bytes). */
  s.server.io_error_at = 100;
  int32_t rc;
  rc = poll_through(&s.job);
  CHECK(rc == NPUB_E_TRANSPORT, "broken connection: %s", npub_result_name(rc));
  CHECK(npub_agent_status(&agent_storage, &st) == NPUB_OK && st.download_written > 0 &&
            st.download_written % 16384 == 0 &&
            st.download_total == npub_test_pack2_len,
        "after the failed download: %u of %u bytes durable", (unsigned)st.download_written,
        (unsigned)st.download_total);
  CHECK(strcmp(s.server.last_state, "downloading") == 0 && s.server.last_attempts == 0,
        "a resume is no new attempt: %s, %u", s.server.last_state, (unsigned)s.server.last_attempts);
  s.server.io_error_at = 0;
  s.server.corrupt_at = s.server.fetches + 3;
  rc = poll_through(&s.job);
  CHECK(rc == NPUB_E_INTEGRITY && last_error_has("SHA-256"), "corrupted download: %s",
        npub_result_name(rc));
  CHECK(strcmp(s.server.last_state, "downloading") == 0 && s.server.last_attempts == 1,
        "retried, not failed: %s, attempts %u", s.server.last_state, (unsigned)s.server.last_attempts);
  CHECK(npub_agent_status(&agent_storage, &st) == NPUB_OK && st.download_written == 0, "afresh: %u",
        (unsigned)st.download_written);
  s.server.corrupt_at = 0;
  CHECK(test_install(&agent_storage, &s.job) == NPUB_OK, "attempt 2 installs");
  failures += check_job(&s.job, npub_test_seq2, npub_test_pack2, npub_test_pack2_len);
  printf("transient faults: %d failures\n", failures);
  return failures;
}

/* The upgrade from pack 1 to pack 2 with the flash_busy hook: every erase and program comes
 * between a busy and an idle call (so inference never reads the chip while it is busy), one
 * erase unit per erase window. */
static int flash_busy_hook(void) {
  scene s;
  int failures = 0;
  scene_setup(&s, 2);
  s.c.flash.busy = nor_busy;
  s.c.clock.feed = feed_watchdog;
  fed = 0;
  CHECK(scene_open_boot(&s), "boot v1");
  CHECK(test_install(&agent_storage, &s.job) == NPUB_OK, "upgrade with the busy hook");
  failures += check_job(&s.job, npub_test_seq2, npub_test_pack2, npub_test_pack2_len);
  CHECK(s.nor.ops > 0 && s.nor.unannounced == 0 && s.nor.bad_windows == 0 && s.nor.windows == s.nor.ops && !s.nor.busy,
        "busy windows: %ld operations, %ld windows, %ld unannounced, %ld bad", s.nor.ops, s.nor.windows,
        s.nor.unannounced, s.nor.bad_windows);
  CHECK(fed >= s.nor.ops, "the watchdog fed before every operation: %ld feeds, %ld operations", fed, s.nor.ops);
  printf("flash busy: %ld operations, each in its own window; %d failures\n", s.nor.ops, failures);
  return failures;
}

/* Power cut at every flash operation of the upgrade from pack 1 to pack 2 (every cut_stride-th
 * one): after each the device boots pack 1 or pack 2, and the next polls finish on pack 2. */
static int power_cuts(long cut_stride) {
  scene s;
  int failures = 0;
  CHECK(scene_boot(&s, 2), "boot");
  long start = s.nor.ops;
  CHECK(test_install(&agent_storage, &s.job) == NPUB_OK, "upgrade");
  long ops = s.nor.ops - start;
  long tried = 0, old_bound = 0, new_bound = 0;
  for (long n = 1; n <= ops; n += cut_stride) {
    scene_setup(&s, 2);
    open_agent(&s.c);
    npub_agent_boot(&agent_storage, &s.job);
    s.nor.cut_at = s.nor.ops + n;
    /* (The last operations, the descriptor's confirmed mark, are best effort: the install may
     * still say NPUB_OK.) */
    int32_t rc = test_install(&agent_storage, &s.job);
    CHECK(rc != NPUB_OK || n + 1 >= ops, "cut %ld: the install succeeded without power", n);
    /* Reboot on the same flash. */
    s.nor = (ram_nor){.mem = flash_mem};
    rc = open_agent(&s.c);
    CHECK(rc == NPUB_OK, "cut %ld: open %s", n, npub_result_name(rc));
    rc = npub_agent_boot(&agent_storage, &s.job);
    if (rc == NPUB_PENDING) rc = npub_agent_confirm(&agent_storage, 0, &s.job);
    CHECK(rc == NPUB_OK && (s.job.sequence == npub_test_seq1 || s.job.sequence == npub_test_seq2),
          "cut %ld: boot %s, sequence %llu", n, npub_result_name(rc), (unsigned long long)s.job.sequence);
    if (s.job.sequence == npub_test_seq1) old_bound++; else new_bound++;
    rc = test_install(&agent_storage, &s.job);
    CHECK((rc == NPUB_OK || rc == NPUB_UP_TO_DATE) && s.job.sequence == npub_test_seq2,
          "cut %ld: finish %s, sequence %llu", n, npub_result_name(rc), (unsigned long long)s.job.sequence);
    if (s.job.sequence == npub_test_seq2 && rc == NPUB_OK)
      failures += check_job(&s.job, npub_test_seq2, npub_test_pack2, npub_test_pack2_len);
    tried++;
  }
  printf("power cuts: %ld of %ld flash operations cut, %ld booted the old pack, %ld the new, %d failures\n",
         tried, ops, old_bound, new_bound, failures);
  return failures;
}

/* The replay floor behind the counter hook: pack 1 then pack 2 installed, then both journal
 * banks erased (a lost journal). Boot still binds the pack that verifies (from the slot
 * descriptors), and pack 1's manifest is refused as a replay because the counter holds 2; a
 * counter callback that breaks its contract (a positive code, a value far above the journal's
 * floor), or half a counter, is refused at open. */
static int counter_hook(void) {
  int failures = 0;
  ram_nor nor = {.mem = flash_mem};
  ram_counter k = {0, 0};
  mem_server server;
  npub_config c;
  npub_job job;
  memset(flash_mem, 0xFF, sizeof flash_mem);
  serve(&server, 1);
  test_config(&c, &nor, arena_mem, &server);
  c.counter.ctx = &k;
  c.counter.read = counter_read;
  CHECK(open_agent(&c) == NPUB_E_CONFIG && last_error_has("counter.raise"), "read without raise");
  c.counter.raise = counter_raise;
  k.garbage = 7;
  CHECK(open_agent(&c) == NPUB_E_CALLBACK && last_error_has("counter.read returned 7"), "garbage read");
  k.garbage = 0;
  /* A read far above the journal's floor (0 on this blank flash) is garbage, not a floor. */
  k.value = UINT64_MAX;
  CHECK(open_agent(&c) == NPUB_E_CALLBACK && last_error_has("more than 4294967296 above the journal"),
        "counter read UINT64_MAX");
  k.value = 0;
  CHECK(open_agent(&c) == NPUB_OK, "open with a counter");
  CHECK(npub_agent_boot(&agent_storage, &job) == NPUB_E_NO_PACK, "blank");
  CHECK(test_install(&agent_storage, &job) == NPUB_OK && k.value == npub_test_seq1, "v1, counter %llu",
        (unsigned long long)k.value);
  serve(&server, 2);
  CHECK(test_install(&agent_storage, &job) == NPUB_OK && k.value == npub_test_seq2, "v2, counter %llu",
        (unsigned long long)k.value);
  /* The journal is lost. */
  memset(flash_mem, 0xFF, 2 * TEST_BANK_BYTES);
  nor = (ram_nor){.mem = flash_mem};
  CHECK(open_agent(&c) == NPUB_OK, "open without a journal");
  int32_t rc = npub_agent_boot(&agent_storage, &job);
  if (rc == NPUB_PENDING) rc = npub_agent_confirm(&agent_storage, 0, &job);
  CHECK(rc == NPUB_OK && job.sequence == npub_test_seq2, "boot without a journal: %s, sequence %llu",
        npub_result_name(rc), (unsigned long long)job.sequence);
  serve(&server, 1);
  /* An honest server has nothing above the floor the counter kept... */
  CHECK(npub_agent_poll(&agent_storage, &job) == NPUB_UP_TO_DATE, "asked after sequence 2");
  /* ...and a replaying one is refused. */
  server.stale = 1;
  rc = test_install(&agent_storage, &job);
  CHECK(rc == NPUB_E_REJECTED && last_error_has("replay"), "v1 replayed: %s", npub_result_name(rc));
  CHECK(job.sequence == npub_test_seq2, "v2 still bound");
  printf("counter hook: %d failures\n", failures);
  return failures;
}

/* Key rotation: from pack 1 (key 1), the server rotated to key 2 revoking key 1. The poll applies
 * the root-signed record, keeps the keyring in its flash area and installs key 2's manifest; after
 * a power cycle (the same factory trust: key 1 and the root) key 1's manifest is refused as
 * revoked, and without fetch_keyring_updates key 2's would not have verified. */
static int rotation(void) {
  scene s;
  int failures = 0;
  int32_t rc;
  scene_setup(&s, 3);
  s.c.requests.fetch_keyring_updates = NULL;
  CHECK(scene_open_boot(&s), "boot v1");
  rc = test_install(&agent_storage, &s.job);
  CHECK(rc == NPUB_E_REJECTED && s.job.sequence == npub_test_seq1,
        "key 2 unknown without the records: %s", npub_result_name(rc));
  s.c.requests.fetch_keyring_updates = mem_fetch_keyring_updates;
  CHECK(scene_open_boot(&s), "boot v1 again");
  rc = test_install(&agent_storage, &s.job);
  CHECK(rc == NPUB_OK && s.job.sequence == npub_test_seq3, "rotated: %s, sequence %llu", npub_result_name(rc),
        (unsigned long long)s.job.sequence);
  /* Power cycle. */
  s.nor = (ram_nor){.mem = flash_mem};
  serve(&s.server, 1);
  s.server.stale = 1;
  test_config(&s.c, &s.nor, arena_mem, &s.server);
  CHECK(open_agent(&s.c) == NPUB_OK, "reopen");
  rc = npub_agent_boot(&agent_storage, &s.job);
  if (rc == NPUB_PENDING) rc = npub_agent_confirm(&agent_storage, 0, &s.job);
  CHECK(rc == NPUB_OK && s.job.sequence == npub_test_seq3, "boot after the rotation: %s", npub_result_name(rc));
  rc = test_install(&agent_storage, &s.job);
  CHECK(rc == NPUB_E_REJECTED && last_error_has("revoked"), "key 1 replayed after the power cycle: %s",
        npub_result_name(rc));
  CHECK(s.job.sequence == npub_test_seq3, "pack 3 still bound");
  printf("rotation: %d failures\n", failures);
  return failures;
}

/* A release key in the open call: the same deployment of pack 2 is refused as unreleased (no
 * fetch_release callback, so the server has no release signatures), before a byte of it is
 * fetched; the release fields are checked at open. */
static int release_keys(void) {
  scene s;
  int failures = 0;
  int32_t rc;
  scene_setup(&s, 2);
  s.c.release_keys = (const uint8_t(*)[32])npub_test_key;
  s.c.release_key_count = 5;
  CHECK(open_agent(&s.c) == NPUB_E_CONFIG && last_error_has("release_key_count"), "5 release keys");
  s.c.release_key_count = 1;
  s.c.release_keys = NULL;
  CHECK(open_agent(&s.c) == NPUB_E_CONFIG && last_error_has("release_keys"), "release keys NULL");
  s.c.release_keys = (const uint8_t(*)[32])npub_test_key;
  CHECK(scene_open_boot(&s), "boot v1");
  rc = test_install(&agent_storage, &s.job);
  CHECK(rc == NPUB_E_REJECTED && last_error_has("release") && last_error_has("carries none"),
        "unreleased pack 2: %s", npub_result_name(rc));
  CHECK(s.job.sequence == npub_test_seq1, "pack 1 still bound");
  printf("release keys: %d failures\n", failures);
  return failures;
}

/* A version-2 manifest signs its self-test record: without a fetch_selftest callback, and with
 * one that answers -404 (the server has none), pack 2 is refused ("self-test record missing"),
 * reported failed, and pack 1 stays bound. */
static int selftest_missing(void) {
  scene s;
  int failures = 0;
  int32_t rc;
  for (int none = 0; none < 2; none++) {
    scene_setup(&s, 2);
    if (none) s.server.selftest = NULL; /* -404 */
    else s.c.requests.fetch_selftest = NULL;
    CHECK(scene_open_boot(&s), "boot v1");
    rc = test_install(&agent_storage, &s.job);
    CHECK(rc == NPUB_E_REJECTED && last_error_has("self-test record missing: the manifest names"),
          "pack 2 without its record (%s): %s", none ? "404" : "no callback", npub_result_name(rc));
    CHECK(strcmp(s.server.last_state, "failed") == 0, "reported %s", s.server.last_state);
    CHECK(s.job.sequence == npub_test_seq1, "pack 1 still bound");
  }
  printf("self-test record missing: %d failures\n", failures);
  return failures;
}

/* The boot check refuses a slot: from pack 1, pack 2 installed and confirmed, then one byte of
 * it flipped in flash. The next boot binds pack 1 from the other slot and
 * npub_agent_boot_skipped says which slot it skipped, its sequence and why; a clean boot skipped
 * nothing, and before a boot the call is out of order. */
static int boot_skipped(void) {
  scene s;
  int failures = 0;
  char why[256];
  int32_t slot = 7;
  uint64_t seq = 7;
  scene_setup(&s, 2);
  CHECK(open_agent(&s.c) == NPUB_OK, "open");
  int32_t rc = npub_agent_boot_skipped(&agent_storage, &slot, &seq, why, sizeof why);
  CHECK(rc == NPUB_E_ORDER && slot == -1 && seq == 0 && strstr(why, "before npub_agent_boot"),
        "before boot: %s: %s", npub_result_name(rc), why);
  CHECK(npub_agent_boot(&agent_storage, &s.job) == NPUB_OK, "boot v1");
  rc = npub_agent_boot_skipped(&agent_storage, &slot, &seq, why, sizeof why);
  CHECK(rc == NPUB_OK && slot == -1 && seq == 0 && why[0] == '\0', "a clean boot skipped %s: %s",
        npub_result_name(rc), why);
  rc = test_install(&agent_storage, &s.job);
  CHECK(rc == NPUB_OK && s.job.sequence == npub_test_seq2, "v2 installed: %s", npub_result_name(rc));
  int32_t v2_slot = (int32_t)s.job.slot;
  /* One byte in the middle of pack 2, as a worn flash cell would change it. */
  flash_mem[s.c.layout.slot_offset[v2_slot] + s.job.pack_bytes / 2] ^= 0x10;
  s.nor = (ram_nor){.mem = flash_mem};
  CHECK(open_agent(&s.c) == NPUB_OK, "reopen");
  rc = npub_agent_boot(&agent_storage, &s.job);
  CHECK(rc == NPUB_OK && s.job.sequence == npub_test_seq1 && (int32_t)s.job.slot != v2_slot,
        "the other slot bound: %s, sequence %llu", npub_result_name(rc), (unsigned long long)s.job.sequence);
  rc = npub_agent_boot_skipped(&agent_storage, &slot, &seq, why, sizeof why);
  CHECK(rc == NPUB_E_INTEGRITY && slot == v2_slot && seq == npub_test_seq2 && strstr(why, "slot ") &&
            strstr(why, "SHA-256"),
        "skipped: %s, slot %d, sequence %llu: %s", npub_result_name(rc), (int)slot, (unsigned long long)seq, why);
  printf("boot skipped: %s: %s\n", npub_result_name(rc), why);
  /* Only the code: every out-pointer may be NULL; a short buffer is truncated, NUL-terminated. */
  CHECK(npub_agent_boot_skipped(&agent_storage, NULL, NULL, NULL, 0) == rc, "the code alone");
  char tiny[6];
  CHECK(npub_agent_boot_skipped(&agent_storage, NULL, NULL, tiny, sizeof tiny) == rc && strlen(tiny) == 5,
        "truncated: '%s'", tiny);
  CHECK(npub_agent_boot_skipped(NULL, &slot, NULL, NULL, 0) == NPUB_E_NULL && slot == -1, "NULL agent");
  printf("boot skipped: %d failures\n", failures);
  return failures;
}

/* "self-test failed: digest <first 8 bytes of want, hex> != <first 8 of got, hex>", as the agent
 * words it. */
static void digest_message(char *out, size_t cap, const uint8_t *want, const uint8_t *got) {
  char a[17], b[17];
  for (int i = 0; i < 8; i++) {
    snprintf(a + 2 * i, 3, "%02x", want[i]);
    snprintf(b + 2 * i, 3, "%02x", got[i]);
  }
  snprintf(out, cap, "self-test failed: digest %s != %s", a, b);
}

/* The golden self-test from C (issue 37): pack 2's golden input read back from its record in
 * flash equals the record's; a too-small buffer is refused with the length it needs; the
 * record's own output digest confirms the pack; one flipped byte in it reverts the pack with
 * "self-test failed: digest ... != ...", reported rolled_back; the old confirm, which carries no
 * digest, confirms as skipped and the installed report says so; a trial after a reboot reads
 * the same input and is compared the same way. */
static int golden_selftest(void) {
  int failures = 0;
  scene s;
  size_t len = 7;
  int32_t rc;
  static uint8_t input[8192];
  const uint8_t *record = npub_test_selftest2;
  const size_t need = npub_test_selftest2_len - 48;
  const uint8_t *want = record + 8; /* the record's output_sha256 */
  uint8_t bad[32];
  char msg[128];
  CHECK(need > 0 && need <= sizeof input, "golden input of %lu bytes", (unsigned long)need);

  /* A digest with one byte flipped: reverted, with both digests in the message. */
  CHECK(scene_boot(&s, 2), "boot v1");
  CHECK(npub_agent_golden_input(&agent_storage, input, sizeof input, &len) == NPUB_E_ORDER && len == 0,
        "golden input with nothing pending");
  rc = poll_through(&s.job);
  CHECK(rc == NPUB_PENDING && s.job.sequence == npub_test_seq2, "v2 pending: %s", npub_result_name(rc));
  CHECK(npub_agent_golden_input(&agent_storage, input, sizeof input, NULL) == NPUB_E_NULL, "len NULL");
  CHECK(npub_agent_golden_input(&agent_storage, NULL, 4, &len) == NPUB_E_NULL, "buf NULL");
  rc = npub_agent_golden_input(&agent_storage, input, need - 1, &len);
  CHECK(rc == NPUB_E_BUFFER && len == need, "one byte short: %s, len %lu of %lu", npub_result_name(rc), (unsigned long)len,
        (unsigned long)need);
  rc = npub_agent_golden_input(&agent_storage, NULL, 0, &len);
  CHECK(rc == NPUB_E_BUFFER && len == need, "the length alone: %s, %lu", npub_result_name(rc), (unsigned long)len);
  memset(input, 0, sizeof input);
  rc = npub_agent_golden_input(&agent_storage, input, sizeof input, &len);
  CHECK(rc == NPUB_OK && len == need && memcmp(input, record + 48, need) == 0,
        "the golden input is the record's: %s, %lu bytes", npub_result_name(rc), (unsigned long)len);
  CHECK(npub_agent_confirm_digest(&agent_storage, NULL, &s.job) == NPUB_E_NULL, "digest NULL");
  memcpy(bad, want, 32);
  bad[0] ^= 0x01;
  rc = npub_agent_confirm_digest(&agent_storage, bad, &s.job);
  digest_message(msg, sizeof msg, want, bad);
  CHECK(rc == NPUB_E_SELF_TEST && last_error_has(msg), "one flipped byte: %s", npub_result_name(rc));
  CHECK(s.job.sequence == npub_test_seq1, "v1 bound again: %llu", (unsigned long long)s.job.sequence);
  CHECK(strcmp(s.server.last_state, "rolled_back") == 0 && strstr(s.server.last_reason, msg) != NULL,
        "reported %s: %s", s.server.last_state, s.server.last_reason);

  /* The record's digest: confirmed, a plain installed report. */
  CHECK(scene_boot(&s, 2), "boot v1");
  rc = poll_through(&s.job);
  CHECK(rc == NPUB_PENDING, "v2 pending: %s", npub_result_name(rc));
  CHECK(npub_agent_golden_input(&agent_storage, input, sizeof input, &len) == NPUB_OK && len == need, "input");
  rc = npub_agent_confirm_digest(&agent_storage, want, &s.job);
  CHECK(rc == NPUB_OK && s.job.sequence == npub_test_seq2, "the matching digest: %s", npub_result_name(rc));
  failures += check_job(&s.job, npub_test_seq2, npub_test_pack2, npub_test_pack2_len);
  CHECK(strcmp(s.server.last_state, "installed") == 0 && s.server.last_reason[0] == '\0',
        "reported %s: '%s'", s.server.last_state, s.server.last_reason);
  CHECK(npub_agent_golden_input(&agent_storage, input, sizeof input, &len) == NPUB_E_ORDER, "after the confirm");

  /* No digest: confirmed, reported as skipped. */
  CHECK(scene_boot(&s, 2), "boot v1");
  CHECK(poll_through(&s.job) == NPUB_PENDING, "v2 pending");
  rc = npub_agent_confirm(&agent_storage, 0, &s.job);
  CHECK(rc == NPUB_OK && s.job.sequence == npub_test_seq2, "confirm without a digest: %s", npub_result_name(rc));
  CHECK(strcmp(s.server.last_state, "installed") == 0 && strstr(s.server.last_reason, "self-test skipped: no NPU"),
        "reported %s: '%s'", s.server.last_state, s.server.last_reason);

  /* The trial after a reboot while pending: the same input, the same comparison. */
  CHECK(scene_boot(&s, 2), "boot v1");
  CHECK(poll_through(&s.job) == NPUB_PENDING, "v2 pending");
  s.nor = (ram_nor){.mem = flash_mem};
  CHECK(open_agent(&s.c) == NPUB_OK, "reboot");
  rc = npub_agent_boot(&agent_storage, &s.job);
  CHECK(rc == NPUB_PENDING && s.job.sequence == npub_test_seq2, "v2 on trial: %s", npub_result_name(rc));
  rc = npub_agent_golden_input(&agent_storage, input, sizeof input, &len);
  CHECK(rc == NPUB_OK && len == need && memcmp(input, record + 48, need) == 0, "the trial's input: %s",
        npub_result_name(rc));
  rc = npub_agent_confirm_digest(&agent_storage, bad, &s.job);
  CHECK(rc == NPUB_E_SELF_TEST && last_error_has(msg) && s.job.sequence == npub_test_seq1,
        "the trial with a flipped byte: %s, sequence %llu", npub_result_name(rc),
        (unsigned long long)s.job.sequence);
  printf("golden self-test: %lu-byte input; %d failures\n", (unsigned long)need, failures);
  return failures;
}

int run_common_tests(long cut_stride) {
  int failures = bad_calls();
  /* The flash with pack 1 installed and confirmed (bad_calls installed it): the base of the rest. */
  memcpy(snapshot, flash_mem, sizeof flash_mem);
  {
    scene s;
    int ok = scene_boot(&s, 2);
    if (!ok) failures++;
    if (ok) test_print_job("boot (memory transport)", &s.job);
    if (ok && test_install(&agent_storage, &s.job) == NPUB_OK) {
      test_print_job("installed (memory transport)", &s.job);
      failures += check_job(&s.job, npub_test_seq2, npub_test_pack2, npub_test_pack2_len);
    } else {
      failures++;
    }
  }
  failures += self_test_failure();
  failures += transient_faults();
  failures += flash_busy_hook();
  failures += power_cuts(cut_stride);
  failures += counter_hook();
  failures += rotation();
  failures += release_keys();
  failures += selftest_missing();
  failures += boot_skipped();
  failures += golden_selftest();
  return failures;
}
