/* DALI's separable resampling along one axis (cpu_image._resample_axis): per output index, the
   first tap's product, then each further tap's product added in turn, the same float32 operations
   in the same order as the numpy path, so that integer outputs round as the numpy path's do; and
   cpu_image.resample's final rounding, for uint8 outputs. Built with -ffp-contract=off: no fused
   multiply-adds, each product and sum rounded to float32. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#define ALWAYS_INLINE static inline __attribute__((always_inline))
/* float32 sums made at a time: a uint8 output's are rounded while they are in cache */
#define CHUNK 1024

/* source[i] as float32: levels (levels[v] = v) for a uint8 source, NULL for a float32 one. Inlined
   with levels a constant NULL or not, each loop below is built once per source type; along rows
   the uint8 values are converted in vector instructions, one pixel's through levels (a load, where
   converting one value at a time takes twice as long) */
ALWAYS_INLINE float row_value(const void *source, int64_t i, const float *levels) {
    return levels ? (float)((const uint8_t *)source)[i] : ((const float *)source)[i];
}

ALWAYS_INLINE float pixel_value(const void *source, int64_t i, const float *levels) {
    return levels ? levels[((const uint8_t *)source)[i]] : ((const float *)source)[i];
}

/* sums[j] for j in [0, count): the taps' source rows (inner values each, from the row tap[k],
   column start) times their weights, summed in order; the loops over j run in vector instructions */
ALWAYS_INLINE void taps_row(const void *source, const float *levels, int64_t inner, int64_t start, int64_t count,
                            const int64_t *tap, const float *weights, int64_t support, float *restrict sums) {
    const float w0 = weights[0];
    const int64_t first = tap[0] * inner + start;
    for (int64_t j = 0; j < count; j++)
        sums[j] = row_value(source, first + j, levels) * w0;
    for (int64_t k = 1; k < support; k++) {
        const float w = weights[k];
        const int64_t row = tap[k] * inner + start;
        for (int64_t j = 0; j < count; j++)
            sums[j] = sums[j] + row_value(source, row + j, levels) * w;
    }
}

/* the same sums along the last axis, for output pixels [first, first + count): each pixel's few
   channels (a constant once inlined) summed in registers, where a loop over them would not pay */
ALWAYS_INLINE void taps_pixels(const void *source, const float *levels, int channels, int64_t first, int64_t count,
                               const int64_t *taps, const float *weights, int64_t support, float *restrict sums) {
    for (int64_t o = first; o < first + count; o++) {
        const int64_t *tap = taps + o * support;
        const float *w = weights + o * support;
        float pixel[4];
        for (int c = 0; c < channels; c++)
            pixel[c] = pixel_value(source, tap[0] * channels + c, levels) * w[0];
        for (int64_t k = 1; k < support; k++)
            for (int c = 0; c < channels; c++)
                pixel[c] = pixel[c] + pixel_value(source, tap[k] * channels + c, levels) * w[k];
        for (int c = 0; c < channels; c++)
            sums[(o - first) * channels + c] = pixel[c];
    }
}

/* np.clip(np.trunc(x + np.copysign(0.5, x)), 0, 255).astype(uint8): clamped, then truncated by the
   conversion to int32 (the same within the clamp; truncf runs in vector instructions only from
   SSE4.1 on), then narrowed in a loop of its own (the two in one loop vectorize poorly) */
static void round_uint8(const float *restrict values, int64_t count, uint8_t *restrict out) {
    int32_t whole[CHUNK];
    for (int64_t i = 0; i < count; i++) {
        float x = values[i] + copysignf(0.5f, values[i]);
        x = x > 0.0f ? x : 0.0f;
        whole[i] = (int32_t)(x < 255.0f ? x : 255.0f);
    }
    for (int64_t i = 0; i < count; i++)
        out[i] = (uint8_t)whole[i];
}

/* one outer index's output [out_size, inner] into out: float32, or uint8 (out_uint8) summed a chunk
   at a time and rounded */
ALWAYS_INLINE void resample_slab(const void *source, const float *levels, int64_t inner, const int64_t *taps,
                                 const float *weights, int64_t support, int64_t out_size, void *out,
                                 int out_uint8) {
    float chunk[CHUNK];
    if (inner <= 4) {
        const int64_t pixels = CHUNK / 4;
        for (int64_t first = 0; first < out_size; first += pixels) {
            const int64_t count = out_size - first < pixels ? out_size - first : pixels;
            float *sums = out_uint8 ? chunk : (float *)out + first * inner;
            switch (inner) {
            case 1: taps_pixels(source, levels, 1, first, count, taps, weights, support, sums); break;
            case 2: taps_pixels(source, levels, 2, first, count, taps, weights, support, sums); break;
            case 3: taps_pixels(source, levels, 3, first, count, taps, weights, support, sums); break;
            default: taps_pixels(source, levels, 4, first, count, taps, weights, support, sums); break;
            }
            if (out_uint8)
                round_uint8(chunk, count * inner, (uint8_t *)out + first * inner);
        }
        return;
    }
    for (int64_t o = 0; o < out_size; o++)
        for (int64_t start = 0; start < inner; start += CHUNK) {
            const int64_t count = inner - start < CHUNK ? inner - start : CHUNK;
            float *sums = out_uint8 ? chunk : (float *)out + o * inner + start;
            taps_row(source, levels, inner, start, count, taps + o * support, weights + o * support, support, sums);
            if (out_uint8)
                round_uint8(chunk, count, (uint8_t *)out + o * inner + start);
        }
}

/* source: [outer, in_size, inner] uint8 (source_uint8) or float32, C order; taps (int64, each in
   [0, in_size)) and weights (float32): [out_size, support], support >= 1; out: [outer, out_size,
   inner] float32, or uint8 rounded as cpu_image.resample rounds (out_uint8) */
void penstock_resample_axis(const void *source, int source_uint8, int64_t outer, int64_t in_size, int64_t inner,
                            const int64_t *taps, const float *weights, int64_t support, int64_t out_size, void *out,
                            int out_uint8) {
    const int64_t in_slab = in_size * inner;
    const int64_t out_bytes = out_size * inner * (out_uint8 ? 1 : (int64_t)sizeof(float));
    float levels[256];
    for (int v = 0; v < 256; v++)
        levels[v] = (float)v;
    for (int64_t b = 0; b < outer; b++) {
        void *slab = (uint8_t *)out + b * out_bytes;
        if (source_uint8)
            resample_slab((const uint8_t *)source + b * in_slab, levels, inner, taps, weights, support, out_size,
                          slab, out_uint8);
        else
            resample_slab((const float *)source + b * in_slab, NULL, inner, taps, weights, support, out_size, slab,
                          out_uint8);
    }
}
