/* DALI's CPU resampling of audio (dali/kernels/signal/resampling_cpu.cc, kernels.audio_resampling):
   outputs in blocks of 256, each block's input position from a float64 start and stepped in
   float32; each output the windowed sinc of the inputs within `lobes` of its position, the window
   read from a table and interpolated linearly. Mono signals sum their taps four at a time in four
   lanes, then the lanes pairwise, as DALI's SSE2 loop does, the remaining taps one by one; several
   channels sum each channel's taps one by one. Built with -ffp-contract=off: each product and sum
   rounded to float32, as in DALI. */
#include <math.h>
#include <stdint.h>

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
                float lane0 = 0, lane1 = 0, lane2 = 0, lane3 = 0;
                float x0 = (float)i - in_pos, x1 = (float)(i + 1) - in_pos;
                float x2 = (float)(i + 2) - in_pos, x3 = (float)(i + 3) - in_pos;
                for (; i + 3 < i1; i += 4) {
                    lane0 = lane0 + inputs[i] * window_lane(&window, x0);
                    lane1 = lane1 + inputs[i + 1] * window_lane(&window, x1);
                    lane2 = lane2 + inputs[i + 2] * window_lane(&window, x2);
                    lane3 = lane3 + inputs[i + 3] * window_lane(&window, x3);
                    x0 = x0 + 4.0f, x1 = x1 + 4.0f, x2 = x2 + 4.0f, x3 = x3 + 4.0f;
                }
                float sum = (lane0 + lane2) + (lane1 + lane3);
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
