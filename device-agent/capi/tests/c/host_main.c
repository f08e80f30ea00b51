/* The host program: installs the server's current deployment over a POSIX socket (the agent's
 * own HTTP client over the stream callbacks), then runs the shared checks. Usage:
 *   host_test URL TOKEN        exit 0 when every check passed
 *   host_test --tls HTTPS_URL TOKEN CA_FILE OTHER_CA_FILE
 *                              the install over TLS: the stream callbacks are OpenSSL's (standing in
 *                              for the mbedTLS of an FSP build), the server checked against
 *                              CA_FILE; then refused under OTHER_CA_FILE
 *   host_test --presigned HTTPS_URL TOKEN CA_FILE CLIENT_CERT CLIENT_KEY
 *                              the install from a server that presigns downloads: `connect` presents
 *                              the device's client certificate (CLIENT_CERT, CLIENT_KEY) to the
 *                              server, `connect_anonymous` (no certificate, the hop's checked
 *                              against CA_FILE) opens the redirect hops to the bucket
 *   host_test --presigned-without-anonymous HTTPS_URL TOKEN CA_FILE CLIENT_CERT CLIENT_KEY
 *                              the same with connect_anonymous NULL: the hop is refused */
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

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

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

/* The firmware's own TLS, behind the same four callbacks (NPUB_TRANSPORT_TLS_STREAM): connect
 * returns only once the server's certificate verified for the host and the handshake completed. */
typedef struct {
  sock tcp;
  SSL_CTX *ctx;
  SSL *ssl;
  long handshakes;
  /* connect_anonymous: the same checks of the server, never a client certificate. */
  SSL_CTX *anon_ctx;
  long anon_handshakes;
} tls_sock;

static void tls_close(void *ctx) {
  tls_sock *t = ctx;
  if (t->ssl) {
    SSL_shutdown(t->ssl);
    SSL_free(t->ssl);
    t->ssl = NULL;
  }
  sock_close(&t->tcp);
}

/* A TCP connection to host:port, then the handshake under `ssl_ctx`. */
static int32_t tls_connect_with(tls_sock *t, SSL_CTX *ssl_ctx, const char *host, size_t host_len, uint16_t port,
                                uint32_t timeout_ms) {
  char name[64];
  tls_close(t);
  int32_t rc = sock_connect(&t->tcp, host, host_len, port, timeout_ms);
  if (rc != 0) return rc;
  memcpy(name, host, host_len);
  name[host_len] = '\0';
  /* The handshake may take the whole connect timeout; reads after it wait 50 ms, as plain ones. */
  struct timeval hs = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000L};
  setsockopt(t->tcp.fd, SOL_SOCKET, SO_RCVTIMEO, &hs, sizeof hs);
  t->ssl = SSL_new(ssl_ctx);
  SSL_set_fd(t->ssl, t->tcp.fd);
  X509_VERIFY_PARAM *param = SSL_get0_param(t->ssl);
  if (X509_VERIFY_PARAM_set1_ip_asc(param, name) != 1) {
    SSL_set_tlsext_host_name(t->ssl, name);
    SSL_set1_host(t->ssl, name);
  }
  SSL_set_alpn_protos(t->ssl, (const unsigned char *)"\x08http/1.1", 9);
  if (SSL_connect(t->ssl) != 1) {
    long verify = SSL_get_verify_result(t->ssl);
    printf("tls: handshake refused: %s\n", X509_verify_cert_error_string(verify));
    tls_close(t);
    return verify != X509_V_OK ? NPUB_IO_TLS_CERTIFICATE : NPUB_IO_TLS_HANDSHAKE;
  }
  struct timeval tv = {0, 50 * 1000};
  setsockopt(t->tcp.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return 0;
}

static int32_t tls_connect(void *ctx, const char *host, size_t host_len, uint16_t port, uint32_t timeout_ms) {
  tls_sock *t = ctx;
  int32_t rc = tls_connect_with(t, t->ctx, host, host_len, port, timeout_ms);
  if (rc == 0) t->handshakes++;
  return rc;
}

/* A redirect hop to another origin (the bucket of a presigned download): its certificate checked
 * for `host` against the same CA, and no client certificate on this context. */
static int32_t tls_connect_anonymous(void *ctx, const char *host, size_t host_len, uint16_t port,
                                     uint32_t timeout_ms) {
  tls_sock *t = ctx;
  int32_t rc = tls_connect_with(t, t->anon_ctx, host, host_len, port, timeout_ms);
  if (rc == 0) t->anon_handshakes++;
  return rc;
}

static int32_t tls_read(void *ctx, uint8_t *buf, size_t len) {
  tls_sock *t = ctx;
  if (!t->ssl) return NPUB_IO_ERROR;
  int n = SSL_read(t->ssl, buf, (int)len);
  if (n > 0) return n;
  switch (SSL_get_error(t->ssl, n)) {
  case SSL_ERROR_ZERO_RETURN: return 0;
  case SSL_ERROR_WANT_READ: return NPUB_IO_TIMEOUT;
  case SSL_ERROR_SYSCALL: return errno == EAGAIN || errno == EWOULDBLOCK ? NPUB_IO_TIMEOUT : NPUB_IO_ERROR;
  default: return NPUB_IO_ERROR;
  }
}

static int32_t tls_write(void *ctx, const uint8_t *buf, size_t len) {
  tls_sock *t = ctx;
  if (!t->ssl) return NPUB_IO_ERROR;
  int n = SSL_write(t->ssl, buf, (int)len);
  return n > 0 ? (int32_t)n : NPUB_IO_ERROR;
}

static SSL_CTX *tls_trusting(const char *ca_file) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  if (SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) {
    fprintf(stderr, "cannot load %s\n", ca_file);
    exit(2);
  }
  return ctx;
}

/* tls_trusting(ca_file) that also presents the device's client certificate. */
static SSL_CTX *tls_identified(const char *ca_file, const char *cert_file, const char *key_file) {
  SSL_CTX *ctx = tls_trusting(ca_file);
  if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1) {
    fprintf(stderr, "cannot load %s, %s\n", cert_file, key_file);
    exit(2);
  }
  return ctx;
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

/* A blank device over `nor` whose config speaks `transport` through the stream callbacks and
 * server of `io` (ctx, URL, token, callbacks): 32 KiB windows, 200 ms budgets. */
static void blank_stream_device(npub_config *c, ram_nor *nor, uint32_t transport, npub_stream io) {
  memset(nor_mem, 0xFF, sizeof nor_mem);
  *nor = (ram_nor){.mem = nor_mem};
  test_config(c, nor, arena, NULL);
  c->transport = transport;
  io.window_bytes = 32 * 1024;
  c->stream = io;
  c->budget_ms = 200;
}

/* Opens the agent on `c`, boots the blank device and polls until the download is over: `*rc` is
 * the last poll's code (NPUB_PENDING once the pack is whole), `msg` its message; every
 * `progress`-th step prints how far it is (0: none). Returns the failures. */
static int poll_blank(npub_config *c, npub_job *job, int32_t *rc, char *msg, size_t cap, int progress) {
  int failures = 0;
  *rc = npub_agent_open(&agent, sizeof agent, c);
  npub_agent_last_error(&agent, msg, cap);
  CHECK(*rc == NPUB_OK, "open: %s: %s", npub_result_name(*rc), msg);
  *rc = npub_agent_boot(&agent, job);
  CHECK(*rc == NPUB_E_NO_PACK, "boot of a blank device: %s", npub_result_name(*rc));
  int steps = 0;
  while ((*rc = npub_agent_poll(&agent, job)) == NPUB_IN_PROGRESS) {
    npub_status st;
    if (progress && steps++ % progress == 0 && npub_agent_status(&agent, &st) == NPUB_OK)
      printf("poll: %u of %u bytes\n", (unsigned)st.download_written, (unsigned)st.download_total);
  }
  npub_agent_last_error(&agent, msg, cap);
  return failures;
}

/* Confirms the pending pack and checks it is the deployed one (pack 2 under manifest 3), in its
 * slot byte for byte. Returns the failures. */
static int confirm_deployed(const npub_config *c, npub_job *job, const char *what) {
  int failures = 0;
  int32_t rc = npub_agent_confirm(&agent, 0, job);
  CHECK(rc == NPUB_OK, "confirm: %s", npub_result_name(rc));
  test_print_job(what, job);
  CHECK(job->sequence == npub_test_seq3 && job->pack_bytes == npub_test_pack2_len, "the deployed pack");
  CHECK(memcmp(nor_mem + c->layout.slot_offset[job->slot ? 1 : 0], npub_test_pack2, npub_test_pack2_len) == 0,
        "the slot holds the server's pack byte for byte");
  return failures;
}

/* Boot a blank device and install what the server deploys to it, over TCP. */
static int install_from_server(const char *url, const char *token) {
  int failures = 0;
  ram_nor nor;
  sock s = {-1};
  npub_config c;
  npub_job job;
  char msg[512];
  int32_t rc;
  blank_stream_device(&c, &nor, NPUB_TRANSPORT_STREAM,
                      (npub_stream){.ctx = &s, .server_url = url, .token = token, .connect = sock_connect,
                                    .read = sock_read, .write = sock_write, .close = sock_close});
  c.clock.feed = host_feed;
  failures += poll_blank(&c, &job, &rc, msg, sizeof msg, 4);
  CHECK(rc == NPUB_PENDING, "poll: %s: %s", npub_result_name(rc), msg);
  failures += confirm_deployed(&c, &job, "installed from the server");
  /* Fed at every read of the socket and before every erase and program. */
  CHECK(host_feeds > nor.ops, "watchdog fed %ld times for %ld flash operations", host_feeds, nor.ops);
  printf("watchdog: fed %ld times (%ld flash operations)\n", host_feeds, nor.ops);
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

/* Boot a blank device and install over TLS, the firmware's TLS stack behind the stream
 * callbacks; then the same server under another CA: refused before a request is written. */
static int install_over_tls(const char *url, const char *token, const char *ca, const char *other_ca) {
  int failures = 0;
  ram_nor nor;
  tls_sock t = {.tcp = {-1}, .ctx = tls_trusting(ca)};
  npub_config c;
  npub_job job;
  char msg[512];
  int32_t rc;
  blank_stream_device(&c, &nor, NPUB_TRANSPORT_TLS_STREAM,
                      (npub_stream){.ctx = &t, .server_url = url, .token = token, .connect = tls_connect,
                                    .read = tls_read, .write = tls_write, .close = tls_close});
  failures += poll_blank(&c, &job, &rc, msg, sizeof msg, 0);
  CHECK(rc == NPUB_PENDING, "poll over TLS: %s: %s", npub_result_name(rc), msg);
  failures += confirm_deployed(&c, &job, "installed over TLS");
  printf("tls: %ld handshakes\n", t.handshakes);
  tls_close(&t);
  SSL_CTX_free(t.ctx);

  /* Another CA: connect refuses the certificate, the agent reports it and wrote nothing. */
  t.ctx = tls_trusting(other_ca);
  t.handshakes = 0;
  memset(nor_mem, 0xFF, sizeof nor_mem);
  rc = npub_agent_open(&agent, sizeof agent, &c);
  CHECK(rc == NPUB_OK, "open: %s", npub_result_name(rc));
  npub_agent_boot(&agent, &job);
  rc = npub_agent_poll(&agent, &job);
  npub_agent_last_error(&agent, msg, sizeof msg);
  CHECK(rc == NPUB_E_TRANSPORT && strstr(msg, "TLS: the server's certificate"), "%s: %s",
        npub_result_name(rc), msg);
  CHECK(t.handshakes == 0, "no handshake completed");
  printf("under another CA: %s\n", msg);
  tls_close(&t);
  SSL_CTX_free(t.ctx);
  printf("install over TLS: %d failures\n", failures);
  return failures;
}

/* Boot a blank device and install from a server that answers pack requests with a 307 to a
 * presigned https:// URL of its bucket: the manifest through `connect` (the device's client
 * certificate and token), the pack through `connect_anonymous` hops. Without connect_anonymous
 * the hop is refused and nothing is installed. */
static int install_presigned(const char *url, const char *token, const char *ca, const char *cert,
                             const char *key, int anonymous) {
  int failures = 0;
  ram_nor nor;
  tls_sock t = {.tcp = {-1}, .ctx = tls_identified(ca, cert, key), .anon_ctx = tls_trusting(ca)};
  npub_config c;
  npub_job job;
  char msg[512];
  int32_t rc;
  blank_stream_device(&c, &nor, NPUB_TRANSPORT_TLS_STREAM,
                      (npub_stream){.ctx = &t,
                                    .server_url = url,
                                    .token = token,
                                    .connect = tls_connect,
                                    .connect_anonymous = anonymous ? tls_connect_anonymous : NULL,
                                    .read = tls_read,
                                    .write = tls_write,
                                    .close = tls_close});
  failures += poll_blank(&c, &job, &rc, msg, sizeof msg, 0);
  if (anonymous) {
    CHECK(rc == NPUB_PENDING, "poll with presigned downloads: %s: %s", npub_result_name(rc), msg);
    failures += confirm_deployed(&c, &job, "installed through presigned hops");
    CHECK(t.anon_handshakes >= 1, "the pack came through connect_anonymous");
  } else {
    CHECK(rc == NPUB_E_TRANSPORT && strstr(msg, "connect_anonymous"), "hop without connect_anonymous: %s: %s",
          npub_result_name(rc), msg);
    printf("hop without connect_anonymous: %s\n", msg);
    npub_status st;
    npub_agent_status(&agent, &st);
    CHECK(st.active_slot == -1, "nothing installed");
  }
  printf("tls: %ld handshakes with the server, %ld anonymous\n", t.handshakes, t.anon_handshakes);
  tls_close(&t);
  SSL_CTX_free(t.ctx);
  SSL_CTX_free(t.anon_ctx);
  printf("install with presigned downloads: %d failures\n", failures);
  return failures;
}

int main(int argc, char **argv) {
  if (argc == 7 && (strcmp(argv[1], "--presigned") == 0 || strcmp(argv[1], "--presigned-without-anonymous") == 0)) {
    int failures = install_presigned(argv[2], argv[3], argv[4], argv[5], argv[6], strcmp(argv[1], "--presigned") == 0);
    printf("%s: %d failures\n", failures ? "FAILED" : "PASSED", failures);
    return failures ? 1 : 0;
  }
  if (argc == 6 && strcmp(argv[1], "--tls") == 0) {
    int failures = install_over_tls(argv[2], argv[3], argv[4], argv[5]);
    printf("%s: %d failures\n", failures ? "FAILED" : "PASSED", failures);
    return failures ? 1 : 0;
  }
  if (argc != 3) {
    fprintf(stderr,
            "usage: %s URL TOKEN | --tls HTTPS_URL TOKEN CA_FILE OTHER_CA_FILE | "
            "--presigned[-without-anonymous] HTTPS_URL TOKEN CA_FILE CLIENT_CERT CLIENT_KEY\n",
            argv[0]);
    return 2;
  }
  int failures = install_from_server(argv[1], argv[2]);
  failures += run_common_tests(1);
  printf("%s: %d failures\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
