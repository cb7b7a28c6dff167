#ifndef LOOKOUT_HASH_H
#define LOOKOUT_HASH_H

#include <stddef.h>
#include <stdint.h>

/// SHA-256's 64 round constants (FIPS 180-4), for the Swift compression function too.
const uint32_t *lookout_sha256_constants(void);

/// Whether this CPU has the SHA extensions (and SSSE3, SSE4.1) that `lookout_sha256_blocks` needs.
int lookout_sha256_instructions(void);

/// `blocks` 64-byte blocks of `data` compressed into `state` (a…h, FIPS 180-4) with the SHA extensions; only
/// where `lookout_sha256_instructions()` says so.
void lookout_sha256_blocks(uint32_t state[8], const uint8_t *data, size_t blocks);

#endif
