/* The C test firmware for QEMU mps3-an547: the shared checks of agent_test.c (the server's two
 * versions in memory: bad calls, installs, a failed self-test, power cuts) on the Cortex-M55, with
 * the library cross-built for thumbv8m.main-none-eabihf. The clock is a counter that each call
 * advances (nothing here waits for real time; the agent only needs it monotonic). */
#include <stdio.h>

#include "agent_test.h"

static uint64_t fake_ms;

uint64_t test_now_ms(void *ctx) {
  (void)ctx;
  return fake_ms++;
}

void test_sleep_ms(void *ctx, uint32_t ms) {
  (void)ctx;
  fake_ms += ms;
}

int main(void) {
  printf("npub-agent C test on %s\n", "Cortex-M55 (QEMU mps3-an547)");
  if (npub_agent_abi_ok() != NPUB_OK) {
    printf("FAILED: the header and the library disagree on a struct's layout\n");
    return 1;
  }
  printf("agent storage: %lu bytes (NPUB_AGENT_STORAGE_BYTES %lu)\n", (unsigned long)npub_agent_storage_bytes(),
         (unsigned long)NPUB_AGENT_STORAGE_BYTES);
  /* Every power-cut point of the upgrade, as on the host. */
  int failures = run_common_tests(1);
  printf("%s: %d failures\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
