/* Reset for the C test firmware on QEMU mps3-an547: the vector table, the FPU switched on, .bss
 * cleared, newlib's semihosting (librdimon) stdio opened, then main(); its result goes back to
 * the host through semihosting's exit. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npub_agent.h"

extern uint32_t __stack_top;
extern uint8_t __bss_start__[], __bss_end__[];
extern void initialise_monitor_handles(void);
extern int main(void);

void reset_handler(void);

static void fault_handler(void) {
  printf("FAILED: CPU fault\n");
  exit(3);
}

__attribute__((section(".vectors"), used)) static void (*const vectors[16])(void) = {
    (void (*)(void))(uintptr_t)&__stack_top,
    reset_handler,
    fault_handler, /* NMI */
    fault_handler, /* HardFault */
    fault_handler, /* MemManage */
    fault_handler, /* BusFault */
    fault_handler, /* UsageFault */
    fault_handler, /* SecureFault */
};

void reset_handler(void) {
  /* CPACR: full access to CP10 and CP11 (the FPU) before any floating-point instruction. */
  *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20;
  __asm volatile("dsb\n\tisb" ::: "memory");
  memset(__bss_start__, 0, (size_t)(__bss_end__ - __bss_start__));
  initialise_monitor_handles();
  exit(main());
}

/* The library's panic handler calls this on the target: report and stop. */
void npub_agent_panicked(int32_t code, const char *file, size_t file_len, uint32_t line) {
  printf("FAILED: the agent panicked (%ld) at %.*s:%lu\n", (long)code, (int)file_len, file, (unsigned long)line);
  exit(4);
}

/* newlib's init/fini arrays call these (crti/crtn are not linked with -nostartfiles). */
void _init(void) {}
void _fini(void) {}
