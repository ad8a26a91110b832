/* crop_mirror_normalize's CPU form for uint8 HWC images to CHW (cpu_image.lookup_planes): each
   value looked up in its channel's table of 256 results (the normalization, already in the output
   type) and written straight into its plane, mirrored left to right when asked; one pass over the
   image, the output written row by row. */
#include <stdint.h>
#include <string.h>

#define LOOKUP(TYPE)                                                                                  \
    static void lookup_##TYPE(const uint8_t *image, int64_t height, int64_t width, int64_t row_stride,  \
                              int64_t channels, const TYPE *table, TYPE *out, int mirror) {             \
        int64_t plane = height * width;                                                               \
        for (int64_t y = 0; y < height; y++) {                                                        \
            const uint8_t *row = image + y * row_stride;                                              \
            if (channels == 3) { /* one pass over the row: the common case */                        \
                TYPE *red = out + y * width, *green = red + plane, *blue = green + plane;             \
                int64_t step = mirror ? -1 : 1, x_out = mirror ? width - 1 : 0;                       \
                for (int64_t x = 0; x < width; x++, x_out += step) {                                  \
                    const uint8_t *pixel = row + 3 * x;                                               \
                    red[x_out] = table[pixel[0] * 3];                                                 \
                    green[x_out] = table[pixel[1] * 3 + 1];                                           \
                    blue[x_out] = table[pixel[2] * 3 + 2];                                            \
                }                                                                                     \
                continue;                                                                             \
            }                                                                                         \
            for (int64_t c = 0; c < channels; c++) {                                                  \
                TYPE *target = out + c * plane + y * width;                                           \
                const uint8_t *value = row + c;                                                       \
                if (mirror) {                                                                         \
                    for (int64_t x = 0; x < width; x++)                                               \
                        target[width - 1 - x] = table[value[x * channels] * channels + c];            \
                } else {                                                                              \
                    for (int64_t x = 0; x < width; x++)                                               \
                        target[x] = table[value[x * channels] * channels + c];                        \
                }                                                                                     \
            }                                                                                         \
        }                                                                                             \
    }

LOOKUP(uint8_t)
LOOKUP(uint16_t)
LOOKUP(uint32_t)
LOOKUP(uint64_t)

/* table: 256 x channels values of `item_size` bytes (the output type's bits); out: channels x
   height x width of the same type, contiguous */
void penstock_lookup_planes(const uint8_t *image, int64_t height, int64_t width, int64_t row_stride,
                            int64_t channels, const void *table, int item_size, void *out, int mirror) {
    switch (item_size) {
    case 1: lookup_uint8_t(image, height, width, row_stride, channels, table, out, mirror); break;
    case 2: lookup_uint16_t(image, height, width, row_stride, channels, table, out, mirror); break;
    case 4: lookup_uint32_t(image, height, width, row_stride, channels, table, out, mirror); break;
    case 8: lookup_uint64_t(image, height, width, row_stride, channels, table, out, mirror); break;
    }
}
