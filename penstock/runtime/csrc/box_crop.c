/* random_bbox_crop's scoring of candidate windows against a sample's boxes
   (operators.detection.random_crops.BoxCropper.evaluate): the same float64 operations in the same
   order as the numpy path, so that every score and every kept box is the same. Built with
   -ffp-contract=off: no fused multiply-adds, each product and sum rounded as written. */
#include <math.h>
#include <stdint.h>

/* low, high, centres: dimensions x count (the boxes' corners and centres, axis after axis);
   volumes: count; anchors, extents: dimensions x windows. iou: the union is the window's volume and
   the box's less the intersection (else the box's volume); all_boxes: a window scores its worst box
   (else its best); prune_given: a box is kept where at least prune of its volume is inside (else
   where its centre is, the far side open). Writes scores (windows) and kept (count x windows). */
void penstock_score_windows(const double *low, const double *high, const double *volumes, const double *centres,
                            int count, int dimensions, const double *anchors, const double *extents, int windows,
                            int iou, int all_boxes, int prune_given, double prune, double *scores, uint8_t *kept) {
    for (int a = 0; a < windows; a++) {
        double window_volume = extents[a] * extents[windows + a];
        if (dimensions == 3)
            window_volume = window_volume * extents[2 * windows + a];
        double score = 0.0;
        for (int n = 0; n < count; n++) {
            double inter = 1.0;
            int inside = 1;
            for (int d = 0; d < dimensions; d++) {
                double anchor = anchors[d * windows + a], far = anchor + extents[d * windows + a];
                double box_high = high[d * count + n], box_low = low[d * count + n];
                double overlap = (box_high < far ? box_high : far) - (box_low > anchor ? box_low : anchor);
                overlap = overlap > 0.0 ? overlap : 0.0;
                inter = d == 0 ? overlap : inter * overlap;
                double centre = centres[d * count + n];
                inside = inside && centre >= anchor && centre < far;
            }
            double uni = iou ? (window_volume + volumes[n]) - inter : volumes[n];
            double value = uni > 0.0 ? inter / uni : -INFINITY;
            if (n == 0)
                score = value;
            else if (all_boxes)
                score = value < score ? value : score;
            else
                score = value > score ? value : score;
            kept[n * windows + a] = prune_given ? (inter > 0.0 && inter / volumes[n] >= prune) : inside;
        }
        scores[a] = score;
    }
}
