/* uuid: a device's 16 UUID bytes as NVIDIA writes them,
 * "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx": the one form in which CUDA
 * devices, NVML devices and VRAM_VISIBLE_DEVICES prefixes are compared. */
#ifndef VRAM_UUID_H
#define VRAM_UUID_H

#define UUID_TEXT_SIZE 41

static inline void uuid_text(const unsigned char b[16], char out[UUID_TEXT_SIZE])
{
    static const char hex[] = "0123456789abcdef";
    char *o = out;
    *o++ = 'G', *o++ = 'P', *o++ = 'U', *o++ = '-';
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *o++ = '-';
        *o++ = hex[b[i] >> 4];
        *o++ = hex[b[i] & 15];
    }
    *o = 0;
}

#endif
