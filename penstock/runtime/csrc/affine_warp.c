/* DALI's CPU bilinear warp of an HWC float32 image (cpu_image.affine_sample): the same float32
   operations in the same order as the numpy path, so that integer outputs round as DALI's do. Built
   with -ffp-contract=off: no fused multiply-adds, each product and sum rounded to float32. */
#include <math.h>
#include <stdint.h>

static inline float corner(const float *image, int in_h, int in_w, int channels, int column, int row, int c,
                           const float *border) {
    if (border && (column < 0 || column >= in_w || row < 0 || row >= in_h))
        return border[c];
    column = column < 0 ? 0 : (column >= in_w ? in_w - 1 : column);
    row = row < 0 ? 0 : (row >= in_h ? in_h - 1 : row);
    return image[((int64_t)row * in_w + column) * channels + c];
}

/* matrix: 2x3 float32, output pixel centres -> input coordinates; border: one float32 value per
   channel, or NULL to repeat the edge; out: out_h x out_w x channels float32 */
void penstock_affine_linear(const float *image, int in_h, int in_w, int channels, const float *matrix,
                            int out_h, int out_w, const float *border, float *out) {
    const float half = 0.5f;
    for (int y = 0; y < out_h; y++) {
        float row_centre = (float)y + half;
        float start[2];
        for (int axis = 0; axis < 2; axis++) {
            const float *m = matrix + 3 * axis;
            float base = m[2] + m[0] * half;
            start[axis] = base + m[1] * row_centre;
        }
        float tile_step[2] = {256.0f * matrix[0], 256.0f * matrix[3]};
        float *out_row = out + (int64_t)y * out_w * channels;
        for (int first = 0; first < out_w; first += 256) {
            int last = first + 256 < out_w ? first + 256 : out_w;
            float sx = start[0], sy = start[1];
            for (int x = first; x < last; x++) {
                if (x > first) {
                    sx = sx + matrix[0];
                    sy = sy + matrix[3];
                }
                float px_ = sx - half, py_ = sy - half;
                float fx = floorf(px_), fy = floorf(py_);
                float qx = px_ - fx, qy = py_ - fy;
                float px = 1.0f - qx;
                int x0 = (int)fx, y0 = (int)fy;
                float *o = out_row + (int64_t)x * channels;
                for (int c = 0; c < channels; c++) {
                    float v00 = corner(image, in_h, in_w, channels, x0, y0, c, border);
                    float v10 = corner(image, in_h, in_w, channels, x0 + 1, y0, c, border);
                    float v01 = corner(image, in_h, in_w, channels, x0, y0 + 1, c, border);
                    float v11 = corner(image, in_h, in_w, channels, x0 + 1, y0 + 1, c, border);
                    float a = v00 * px, b = v10 * qx;
                    float top = a + b;
                    float d = v01 * px, e = v11 * qx;
                    float bottom = d + e;
                    bottom = bottom - top;
                    bottom = bottom * qy;
                    o[c] = bottom + top;
                }
            }
            start[0] = start[0] + tile_step[0];
            start[1] = start[1] + tile_step[1];
        }
    }
}
