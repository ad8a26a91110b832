/* SSD's matching of one sample's boxes to the anchors (box_encoder's CPU form,
   operators.detection.box_encoder.encode_sample): the same float32 operations in the same order as
   the numpy path, so that IoUs, ties and the criteria threshold fall the same way. Built with
   -ffp-contract=off: no fused multiply-adds, each product and sum rounded to float32. */
#include <math.h>
#include <stdint.h>

/* the IoU of one box with every anchor, into row: the anchors' coordinates as columns (left, top,
   right, bottom: anchor_count each) so that the loop runs along them, in vector registers */
static void box_row(const float *box, const float *columns, const float *areas, int anchor_count, int all_positive,
                    float *restrict row) {
    const float *restrict left = columns, *restrict top = columns + anchor_count,
                *restrict right = columns + 2 * anchor_count, *restrict bottom = columns + 3 * anchor_count;
    const float box_left = box[0], box_top = box[1], box_right = box[2], box_bottom = box[3];
    const float box_area = (box_right - box_left) * (box_bottom - box_top);
    for (int j = 0; j < anchor_count; j++) {
        float width = (box_right < right[j] ? box_right : right[j]) - (box_left > left[j] ? box_left : left[j]);
        float height = (box_bottom < bottom[j] ? box_bottom : bottom[j]) - (box_top > top[j] ? box_top : top[j]);
        float inter = (width > 0.0f ? width : 0.0f) * (height > 0.0f ? height : 0.0f);
        float uni = (box_area + areas[j]) - inter;
        row[j] = all_positive || uni > 0.0f ? inter / uni : 0.0f;
    }
}

/* the index of the last maximum of values[0:count] (the maximum taken in 8 lanes: a loop the compiler
   turns into vector instructions, which one running maximum is not) */
static int last_argmax(const float *restrict values, int count) {
    float lanes[8], best = values[0];
    for (int k = 0; k < 8; k++)
        lanes[k] = best;
    int whole = count - count % 8;
    for (int j = 0; j < whole; j += 8)
        for (int k = 0; k < 8; k++)
            lanes[k] = values[j + k] > lanes[k] ? values[j + k] : lanes[k];
    for (int j = whole; j < count; j++)
        best = values[j] > best ? values[j] : best;
    for (int k = 0; k < 8; k++)
        best = lanes[k] > best ? lanes[k] : best;
    int index = count - 1;
    while (values[index] != best)
        index--;
    return index;
}

/* boxes: count x 4 ltrb; columns: the anchors' left, top, right and bottom (anchor_count each),
   areas: theirs; centre_extent: anchor_count x 4 (x, y, width, height); scaled: 4 x anchor_count,
   centre_extent's rows times scale; means, stds: 4 each; iou: room for (count + 1) x anchor_count.
   Writes out (anchor_count x 4) and best_box (the box each anchor took, -1 for none). */
void penstock_box_encode(const float *boxes, int count, const float *columns, const float *areas,
                         const float *centre_extent, const float *scaled, int anchor_count, int all_positive,
                         float criteria, int offset, float scale, const float *means, const float *stds,
                         float *iou, float *out, int32_t *best_box) {
    for (int i = 0; i < count; i++) {  /* each box claims its best anchor: the last of its maximum */
        float *row = iou + (int64_t)i * anchor_count;
        box_row(boxes + 4 * i, columns, areas, anchor_count, all_positive, row);
        row[last_argmax(row, anchor_count)] = 2.0f;
    }
    /* each anchor's box: the last of its maximum, the boxes taken in turn over all anchors */
    float *restrict best = iou + (int64_t)count * anchor_count;
    int32_t *restrict index = best_box;
    for (int j = 0; j < anchor_count; j++) {
        best[j] = iou[j];
        index[j] = 0;
    }
    for (int i = 1; i < count; i++) {
        const float *restrict row = iou + (int64_t)i * anchor_count;
        for (int j = 0; j < anchor_count; j++) {  /* a tie goes to the later box (the same value) */
            float value = row[j], held = best[j];
            index[j] = value >= held ? i : index[j];
            best[j] = value > held ? value : held;
        }
    }
    for (int j = 0; j < anchor_count; j++) {
        float *row = out + 4 * j;
        if (!(best[j] > criteria)) {
            best_box[j] = -1;
            for (int c = 0; c < 4; c++)
                row[c] = offset ? 0.0f : centre_extent[4 * j + c];
            continue;
        }
        const float *box = boxes + 4 * index[j];
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
