/* The host program: installs the server's current deployment over a POSIX socket (the agent's
 * own HTTP client over the stream callbacks), then runs the shared checks. Usage:
 *   host_test URL TOKEN        exit 0 when every check passed */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "agent_test.h"

uint64_t test_now_ms(void *ctx) {
  (void)ctx;
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

void test_sleep_ms(void *ctx, uint32_t ms) {
  (void)ctx;
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

typedef struct {
  int fd;
} sock;

static int32_t sock_connect(void *ctx, const char *host, size_t host_len, uint16_t port, uint32_t timeout_ms) {
  sock *s = ctx;
  char name[64];
  struct sockaddr_in a;
  (void)timeout_ms;
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
  if (host_len >= sizeof name) return NPUB_IO_ERROR;
  memcpy(name, host, host_len);
  name[host_len] = '\0';
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (inet_pton(AF_INET, name, &a.sin_addr) != 1) return NPUB_IO_ERROR;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return NPUB_IO_ERROR;
  struct timeval tv = {0, 50 * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return NPUB_IO_ERROR;
  }
  s->fd = fd;
  return 0;
}

static int32_t sock_read(void *ctx, uint8_t *buf, size_t len) {
  sock *s = ctx;
  ssize_t n = recv(s->fd, buf, len, 0);
  if (n >= 0) return (int32_t)n;
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? NPUB_IO_TIMEOUT : NPUB_IO_ERROR;
}

static int32_t sock_write(void *ctx, const uint8_t *buf, size_t len) {
  sock *s = ctx;
  ssize_t n = send(s->fd, buf, len, MSG_NOSIGNAL);
  return n > 0 ? (int32_t)n : NPUB_IO_ERROR;
}

static void sock_close(void *ctx) {
  sock *s = ctx;
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
}

static uint8_t nor_mem[TEST_FLASH_BYTES] __attribute__((aligned(16)));
static uint8_t arena[TEST_ARENA_BYTES] __attribute__((aligned(16)));
static npub_agent agent;

/* The watchdog: counted. */
static long host_feeds;
static void host_feed(void *ctx) {
  (void)ctx;
  host_feeds++;
}

/* Boot a blank device and install what the server deploys to it, over TCP. */
static int install_from_server(const char *url, const char *token) {
  int failures = 0;
  ram_nor nor = {.mem = nor_mem};
  sock s = {-1};
  npub_config c;
  npub_job job;
  char msg[512];
  memset(nor_mem, 0xFF, sizeof nor_mem);
  test_config(&c, &nor, arena, NULL);
  c.transport = NPUB_TRANSPORT_STREAM;
  c.stream.ctx = &s;
  c.stream.server_url = url;
  c.stream.token = token;
  c.stream.connect = sock_connect;
  c.stream.read = sock_read;
  c.stream.write = sock_write;
  c.stream.close = sock_close;
  c.stream.window_bytes = 32 * 1024;
  c.clock.feed = host_feed;
  c.budget_ms = 200;
  int32_t rc = npub_agent_open(&agent, sizeof agent, &c);
  CHECK(rc == NPUB_OK, "open: %s", npub_result_name(rc));
  rc = npub_agent_boot(&agent, &job);
  CHECK(rc == NPUB_E_NO_PACK, "boot of a blank device: %s", npub_result_name(rc));
  int steps = 0;
  while ((rc = npub_agent_poll(&agent, &job)) == NPUB_IN_PROGRESS) {
    npub_status st;
    npub_agent_status(&agent, &st);
    if (steps++ % 4 == 0) printf("poll: %u of %u bytes\n", (unsigned)st.download_written, (unsigned)st.download_total);
  }
  npub_agent_last_error(&agent, msg, sizeof msg);
  CHECK(rc == NPUB_PENDING, "poll: %s: %s", npub_result_name(rc), msg);
  rc = npub_agent_confirm(&agent, 0, &job);
  CHECK(rc == NPUB_OK, "confirm: %s", npub_result_name(rc));
  test_print_job("installed from the server", &job);
  /* Fed at every read of the socket and before every erase and program. */
  CHECK(host_feeds > nor.ops, "watchdog fed %ld times for %ld flash operations", host_feeds, nor.ops);
  printf("watchdog: fed %ld times (%ld flash operations)\n", host_feeds, nor.ops);
  CHECK(job.sequence == npub_test_seq3 && job.pack_bytes == npub_test_pack2_len, "the deployed pack");
  CHECK(memcmp(nor_mem + (job.slot ? c.layout.slot_offset[1] : c.layout.slot_offset[0]), npub_test_pack2,
               npub_test_pack2_len) == 0, "the slot holds the server's pack byte for byte");
  rc = npub_agent_poll(&agent, &job);
  CHECK(rc == NPUB_UP_TO_DATE, "second poll: %s", npub_result_name(rc));
  /* The server gone: a transport error with the HTTP client's reason. */
  c.stream.server_url = "http://127.0.0.1:1";
  npub_agent_open(&agent, sizeof agent, &c);
  npub_agent_boot(&agent, &job);
  rc = npub_agent_poll(&agent, &job);
  npub_agent_last_error(&agent, msg, sizeof msg);
  CHECK(rc == NPUB_E_TRANSPORT && strstr(msg, "npub_agent_poll (manifest)") && strstr(msg, "TCP connect"),
        "%s: %s", npub_result_name(rc), msg);
  printf("unreachable server: %s\n", msg);
  sock_close(&s);
  printf("install from the server: %d failures\n", failures);
  return failures;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s URL TOKEN\n", argv[0]);
    return 2;
  }
  int failures = install_from_server(argv[1], argv[2]);
  failures += run_common_tests(1);
  printf("%s: %d failures\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
