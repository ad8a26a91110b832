/* SSD's matching of one sample's boxes to the anchors (box_encoder's CPU form,
   operators.detection.box_encoder.encode_sample): the same float32 operations in the same order as
   the numpy path, so that IoUs, ties and the criteria threshold fall the same way. Built with
   -ffp-contract=off: no fused multiply-adds, each product and sum rounded to float32. */
#include <math.h>
#include <stdint.h>

/* the IoU of one box with every anchor, into row: the anchors' coordinates as columns (left, top,
   right, bottom: anchor_count each) so that the loop runs along them */
static void box_row(const float *box, const float *columns, const float *areas, int anchor_count, int all_positive,
                    float *row) {
    const float *left = columns, *top = columns + anchor_count, *right = columns + 2 * anchor_count,
                *bottom = columns + 3 * anchor_count;
    float box_area = (box[2] - box[0]) * (box[3] - box[1]);
    for (int j = 0; j < anchor_count; j++) {
        float width = (box[2] < right[j] ? box[2] : right[j]) - (box[0] > left[j] ? box[0] : left[j]);
        float height = (box[3] < bottom[j] ? box[3] : bottom[j]) - (box[1] > top[j] ? box[1] : top[j]);
        float inter = (width > 0.0f ? width : 0.0f) * (height > 0.0f ? height : 0.0f);
        /* most anchors miss a box: their IoU is 0 without the division (0 / a positive union) */
        row[j] = inter > 0.0f ? inter / ((box_area + areas[j]) - inter) : 0.0f;
    }
    if (!all_positive)
        for (int j = 0; j < anchor_count; j++) {
            float width = (box[2] < right[j] ? box[2] : right[j]) - (box[0] > left[j] ? box[0] : left[j]);
            float height = (box[3] < bottom[j] ? box[3] : bottom[j]) - (box[1] > top[j] ? box[1] : top[j]);
            float inter = (width > 0.0f ? width : 0.0f) * (height > 0.0f ? height : 0.0f);
            if (!((box_area + areas[j]) - inter > 0.0f))
                row[j] = 0.0f;
        }
}

/* boxes: count x 4 ltrb; columns: the anchors' left, top, right and bottom (anchor_count each),
   areas: theirs; centre_extent: anchor_count x 4 (x, y, width, height); scaled: 4 x anchor_count,
   centre_extent's rows times scale; means, stds: 4 each; iou: room for count x anchor_count.
   Writes out (anchor_count x 4) and best_box (the box each anchor took, -1 for none). */
void penstock_box_encode(const float *boxes, int count, const float *columns, const float *areas,
                         const float *centre_extent, const float *scaled, int anchor_count, int all_positive,
                         float criteria, int offset, float scale, const float *means, const float *stds,
                         float *iou, float *out, int32_t *best_box) {
    for (int i = 0; i < count; i++) {  /* each box claims its best anchor: the last of its maximum */
        float *row = iou + (int64_t)i * anchor_count;
        box_row(boxes + 4 * i, columns, areas, anchor_count, all_positive, row);
        float best = row[0];
        int claim = 0;
        for (int j = 1; j < anchor_count; j++)
            if (row[j] >= best) {
                best = row[j];
                claim = j;
            }
        row[claim] = 2.0f;
    }
    for (int j = 0; j < anchor_count; j++) {  /* each anchor's box: the last of its maximum */
        float best = iou[j];
        int32_t index = 0;
        for (int i = 1; i < count; i++) {
            float value = iou[(int64_t)i * anchor_count + j];
            if (value >= best) {
                best = value;
                index = i;
            }
        }
        float *row = out + 4 * j;
        if (!(best > criteria)) {
            best_box[j] = -1;
            for (int c = 0; c < 4; c++)
                row[c] = offset ? 0.0f : centre_extent[4 * j + c];
            continue;
        }
        best_box[j] = index;
        const float *box = boxes + 4 * index;
        float chosen[4] = {(box[0] + box[2]) * 0.5f, (box[1] + box[3]) * 0.5f, box[2] - box[0], box[3] - box[1]};
        if (!offset) {
            for (int c = 0; c < 4; c++)
                row[c] = chosen[c];
            continue;
        }
        for (int c = 0; c < 2; c++)
            row[c] = ((chosen[c] * scale - scaled[c * anchor_count + j]) / scaled[(c + 2) * anchor_count + j] -
                      means[c]) / stds[c];
        for (int c = 2; c < 4; c++)
            row[c] = (logf((chosen[c] * scale) / scaled[c * anchor_count + j]) - means[c]) / stds[c];
    }
}
