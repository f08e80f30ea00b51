/* The baseline for npub-core's FNV-1a: the plain C loop, gcc -O3, over the same bytes the Rust
 * bench hashes (payload of the seed-sized pack: i % 251 weights; see bench/fnv.sh). Prints the best
 * nanoseconds per pass over N passes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint32_t fnv1a(const uint8_t *p, size_t n) {
    uint32_t h = 0x811C9DC5u;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x01000193u;
    }
    return h;
}

int main(int argc, char **argv) {
    size_t n = argc > 1 ? strtoul(argv[1], 0, 10) : 1196000;
    int passes = argc > 2 ? atoi(argv[2]) : 300;
    uint8_t *buf = malloc(n);
    for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)(i % 251);
    double best = 1e30;
    volatile uint32_t sink = 0;
    for (int r = 0; r < passes; r++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        sink ^= fnv1a(buf, n);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
        if (ns < best) best = ns;
    }
    printf("%.0f\n", best);
    free(buf);
    return (int)(sink & 0);
}
