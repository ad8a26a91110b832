/* DALI's CPU resampling of audio (dali/kernels/signal/resampling_cpu.cc, kernels.audio_resampling):
   outputs in blocks of 256, each block's input position from a float64 start and stepped in
   float32; each output the windowed sinc of the inputs within `lobes` of its position, the window
   read from a table and interpolated linearly. Mono signals sum their taps four at a time in four
   lanes (in SSE2 where the compiler has it), then the lanes pairwise, as DALI's SSE2 loop does,
   the remaining taps one by one; several channels sum each channel's taps one by one. Built with -ffp-contract=off: each product and sum
   rounded to float32, as in DALI. */
#include <math.h>
#include <stdint.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

typedef struct {
    const float *lookup;
    float scale, center;
} Window;

/* the window at x (input samples from the output's position), as DALI's ResamplingWindow */
static inline float window_at(const Window *window, float x) {
    float position = x * window->scale + window->center;
    float below = floorf(position);
    float fraction = position - below;
    int index = (int)below;
    return window->lookup[index] + fraction * (window->lookup[index + 1] - window->lookup[index]);
}

/* the same, as DALI's four-lane evaluate computes it (truncation: the position is positive) */
static inline float window_lane(const Window *window, float x) {
    float position = x * window->scale + window->center;
    int index = (int)position;
    float fraction = position - (float)index;
    float current = window->lookup[index], next = window->lookup[index + 1];
    return current + fraction * (next - current);
}

/* the mono taps [*i, i1) four at a time, in four lanes (the remaining taps are left to the
   caller, *i set to the first of them): the lanes' sum, (lane0 + lane2) + (lane1 + lane3) */
static inline float four_lane_taps(const Window *window, const float *inputs, int *i_ref, int i1, float in_pos) {
    int i = *i_ref;
#if defined(__SSE2__)
    /* DALI's SSE2 loop, the same operations in the same order: four windows from one gather each
       of the table's entry and the next */
    const __m128 scale = _mm_set1_ps(window->scale), center = _mm_set1_ps(window->center);
    __m128 sums = _mm_setzero_ps();
    __m128 x = _mm_setr_ps((float)i - in_pos, (float)(i + 1) - in_pos, (float)(i + 2) - in_pos,
                           (float)(i + 3) - in_pos);
    const __m128 four = _mm_set1_ps(4.0f);
    for (; i + 3 < i1; i += 4) {
        __m128 position = _mm_add_ps(_mm_mul_ps(x, scale), center);
        __m128i index = _mm_cvttps_epi32(position);
        __m128 fraction = _mm_sub_ps(position, _mm_cvtepi32_ps(index));
        int at[4];
        _mm_storeu_si128((__m128i *)at, index);
        __m128 current = _mm_setr_ps(window->lookup[at[0]], window->lookup[at[1]], window->lookup[at[2]],
                                     window->lookup[at[3]]);
        __m128 next = _mm_setr_ps(window->lookup[at[0] + 1], window->lookup[at[1] + 1], window->lookup[at[2] + 1],
                                  window->lookup[at[3] + 1]);
        __m128 weights = _mm_add_ps(current, _mm_mul_ps(fraction, _mm_sub_ps(next, current)));
        sums = _mm_add_ps(sums, _mm_mul_ps(_mm_loadu_ps(inputs + i), weights));
        x = _mm_add_ps(x, four);
    }
    float lanes[4];
    _mm_storeu_ps(lanes, sums);
#else
    float lanes[4] = {0, 0, 0, 0};
    float x0 = (float)i - in_pos, x1 = (float)(i + 1) - in_pos;
    float x2 = (float)(i + 2) - in_pos, x3 = (float)(i + 3) - in_pos;
    for (; i + 3 < i1; i += 4) {
        lanes[0] = lanes[0] + inputs[i] * window_lane(window, x0);
        lanes[1] = lanes[1] + inputs[i + 1] * window_lane(window, x1);
        lanes[2] = lanes[2] + inputs[i + 2] * window_lane(window, x2);
        lanes[3] = lanes[3] + inputs[i + 3] * window_lane(window, x3);
        x0 = x0 + 4.0f, x1 = x1 + 4.0f, x2 = x2 + 4.0f, x3 = x3 + 4.0f;
    }
#endif
    *i_ref = i;
    return (lanes[0] + lanes[2]) + (lanes[1] + lanes[3]);
}

/* in: n_in frames of `channels` float32 values; out: frames [out_begin, out_end) of the output,
   `channels` values each; lookup: the window table (kernels.audio_resampling.window_table) */
void penstock_audio_resample(const float *in, int64_t n_in, int channels, float *out, int64_t out_begin,
                             int64_t out_end, double in_rate, double out_rate, const float *lookup, int lobes,
                             float window_scale, float window_center) {
    const Window window = {lookup, window_scale, window_center};
    const int64_t block = 256;
    const double scale = in_rate / out_rate;
    const float step = (float)scale;
    float sums[64];
    for (int64_t out_block = out_begin; out_block < out_end; out_block += block) {
        int64_t block_end = out_block + block < out_end ? out_block + block : out_end;
        double start = out_block * scale;
        int64_t first_input = (int64_t)floor(start);
        float in_pos = (float)(start - first_input);
        const float *inputs = in + first_input * channels;
        for (int64_t out_pos = out_block; out_pos < block_end; out_pos++, in_pos += step) {
            int centre = (int)ceilf(in_pos);
            int i0 = centre - lobes, i1 = centre + lobes;
            if (i0 + first_input < 0)
                i0 = (int)-first_input;
            if (i1 + first_input > n_in)
                i1 = (int)(n_in - first_input);
            float *target = out + (out_pos - out_begin) * channels;
            if (channels == 1) {
                int i = i0;
                float sum = four_lane_taps(&window, inputs, &i, i1, in_pos);
                float x = (float)i - in_pos;
                for (; i < i1; i++, x = x + 1.0f)
                    sum = sum + inputs[i] * window_at(&window, x);
                target[0] = sum;
                continue;
            }
            float *total = channels <= 64 ? sums : target;
            for (int c = 0; c < channels; c++)
                total[c] = 0;
            float x = (float)i0 - in_pos;
            for (int64_t i = i0; i < i1; i++, x = x + 1.0f) {
                float weight = window_at(&window, x);
                const float *frame = inputs + i * channels;
                for (int c = 0; c < channels; c++)
                    total[c] = total[c] + frame[c] * weight;
            }
            if (total != target)
                for (int c = 0; c < channels; c++)
                    target[c] = total[c];
        }
    }
}
