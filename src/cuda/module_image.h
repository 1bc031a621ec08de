/* module_image: how long a module image is, read from its own header, as
 * the driver must read it: a fatbinary (or the wrapper the compiler puts
 * around one), a cubin (ELF), or PTX (text ending in a NUL).
 *
 * The simulated driver charges a module its image's size; the interposer
 * reserves that much before a module is loaded, then settles to what the
 * load measurably took. */
#ifndef VRAM_MODULE_IMAGE_H
#define VRAM_MODULE_IMAGE_H

#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define FATBIN_MAGIC 0xBA55ED50u
#define FATBIN_WRAPPER_MAGIC 0x466243B1u

static inline uint32_t image_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint16_t image_u16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint64_t image_u64(const unsigned char *p)
{
    return image_u32(p) | (uint64_t)image_u32(p + 4) << 32;
}

/* The size of an image (and in *start where it begins: a wrapper points to
 * it), or 0 when it is none of the kinds a driver loads. */
static inline size_t image_size(const void *image, const void **start)
{
    const unsigned char *p = image;
    *start = image;
    if (image_u32(p) == FATBIN_WRAPPER_MAGIC) { /* __fatBinC_Wrapper_t: magic, version, data */
        const void *data;
        memcpy(&data, p + 8, sizeof data);
        return data && data != image ? image_size(data, start) : 0;
    }
    if (image_u32(p) == FATBIN_MAGIC) /* magic, version, header size, fat size */
        return (size_t)image_u16(p + 6) + (size_t)image_u64(p + 8);
    if (p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F' && p[4] == 2) {
        uint64_t phoff = image_u64(p + 0x20), shoff = image_u64(p + 0x28);
        uint64_t ph = phoff + (uint64_t)image_u16(p + 0x36) * image_u16(p + 0x38);
        uint64_t sh = shoff + (uint64_t)image_u16(p + 0x3a) * image_u16(p + 0x3c);
        return (size_t)(ph > sh ? ph : sh);
    }
    /* PTX: text, NUL-terminated. */
    size_t n = 0;
    while (p[n]) {
        if (!isprint(p[n]) && !isspace(p[n]))
            return 0;
        n++;
    }
    return n ? n + 1 : 0;
}

#endif
