"""Cases where penstock does not (yet) give DALI's result: case id -> what differs (DALI is the
reference). Each is marked xfail(strict=True), so the tier stays green and a case that starts to
agree fails until it is taken off this list.

Value differences give the first sample that differs, how many elements and by how much; refusals
say which library refuses and with what. Most of them share a few causes:
- arguments DALI has that penstock does not (subpixel_scale, temp_buffer_hint, roi_relative,
  rounding, minibatch_size on some operators) are refused as unknown;
- per-sample forms of arguments differ (DALI's per-sample size, crop_pos, align);
- dtypes DALI refuses (FLOAT16 normals) run;
- pipelines with no external_source or reader (transforms.*, roi_random_crop) are refused;
- resampling (resize, rotate's border, warp_affine cubic) differs in filters and fill rules.
"""

KNOWN_DIFFERENCES: dict[str, str] = {
    # experimental.resize
    'experimental.resize[base]': "DALI has only the GPU form (on CV-CUDA) and refuses the CPU one; penstock's name for resize runs on both devices",
    # resize_crop_mirror
    # resize_crop_mirror_3d
    # warp_affine
    # warp_affine_3d
    # experimental.warp_perspective
    # rotate
    # rotate_3d
    'rotate_3d[interp_type=INTERP_NN]': "values differ where a source position falls exactly on a voxel boundary (36 of 1,287 voxels of one sample, rotated 30 degrees): the nearest voxel is the other one, as penstock's float32 rotation and DALI's differ in the last bit there",
    # water
    # sphere
    # random_resized_crop
    # gaussian_blur
    # laplacian
    # filter
    # erase
    # color_space_conversion
    # color_space_conversion_gray
    # hsv
    # hue
    # saturation
    # color_twist
    # brightness
    # contrast
    # jpeg_compression_distortion
    # noise.gaussian
    # noise.shot
    # noise.salt_and_pepper
    # random.uniform
    # random.uniform_like
    # random.normal
    # random.normal_like
    # random.coin_flip
    # random.coin_flip_like
    # random.choice
    # transforms.rotation
    'transforms.rotation[angle=per_sample]': 'DALI refuses (RuntimeError: error in pipeline), penstock accepts',
    # coord_flip
    # bb_flip
    # crop
    # crop_3d
    # crop_mirror_normalize
    # paste
    # cast_float
    # constant
    # full
    'full[shape=per_sample]': 'DALI refuses per-sample shapes of different lengths in one batch (outputs of different dimensionality); penstock gives each sample its own',
    # slice
    # reshape
    'reshape[shape=per_sample]': 'DALI refuses (RuntimeError: error in pipeline), penstock accepts',
    # reinterpret
    # squeeze
    # reductions.sum
    # reductions.mean
    # reductions.mean_square
    # reductions.rms
    # normalize
    # flip
    # equalize
    # brightness_contrast
    # the Python API (tests/conformance/test_api.py)
    # sources, decoders, readers, segmentation, sequences and other operators (cases_sources.py ... cases_extras.py)
    'readers.numpy_roi[roi_start=per_sample]': 'DALI accepts, penstock refuses: TypeError("readers.numpy: argument \'roi_start\' cannot be a per-sample input (a DataNode); pass a plain value")',
    'readers.numpy_roi[roi_end=per_sample]': 'DALI accepts, penstock refuses: TypeError("readers.numpy: argument \'roi_end\' cannot be a per-sample input (a DataNode); pass a plain value")',
    'random.uniform[shape=per_sample]': "DALI refuses per-sample shapes of different lengths in one batch (400,), (4, 100), (0,); penstock gives each sample its own",
}
