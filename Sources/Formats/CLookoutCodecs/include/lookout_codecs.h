#ifndef LOOKOUT_CODECS_H
#define LOOKOUT_CODECS_H
#include <stddef.h>
#include <stdint.h>

/// Result of decoding: BGR, 8 bits per channel, rows top to bottom (OpenCV's IMREAD_COLOR layout).
typedef struct {
    uint8_t *pixels;  /// malloc'ed width*height*3 bytes; free with lookout_codecs_free
    int width;
    int height;
    char error[256];  /// empty on success
} lookout_decoded;

/// Reads the size of a JPEG or PNG without decoding it. Returns 0 on success.
int lookout_image_size(const uint8_t *data, size_t size, int *width, int *height, char *error, size_t error_size);

/// Decodes a JPEG (baseline or progressive; grayscale, YCbCr, CMYK/YCCK) or a PNG (palette, grayscale,
/// 1–16 bits, with or without alpha) to BGR as cv2.imread(IMREAD_COLOR) would: gray replicated, alpha
/// dropped, 16-bit reduced by keeping the high byte. `max_pixels` bounds width*height.
void lookout_image_decode(const uint8_t *data, size_t size, long long max_pixels, lookout_decoded *result);

/// The mode PIL opens an image in, which decides how CLIP's preprocessing resizes it.
enum {
    LOOKOUT_MODE_RGB = 0,
    LOOKOUT_MODE_L = 1,     /// grayscale
    LOOKOUT_MODE_RGBA = 2,  /// resized premultiplied
    LOOKOUT_MODE_LA = 3,    /// resized premultiplied
    LOOKOUT_MODE_P = 4,     /// palette: resized nearest-neighbour
    LOOKOUT_MODE_1 = 5,     /// bilevel: resized nearest-neighbour
    LOOKOUT_MODE_CMYK = 6,  /// converted as OpenCV does (PIL's conversion differs)
    LOOKOUT_MODE_I16 = 7,   /// 16-bit grayscale, reduced to its high byte (PIL keeps 16 bits)
};

/// Decodes a JPEG or PNG as PIL's `Image.open` sees it: RGBA pixels (`pixels` holds width*height*4 bytes;
/// alpha 255 where the file has none, a tRNS chunk ignored), gray replicated, palettes expanded, 16 bits
/// reduced to the high byte, no EXIF orientation; `mode` receives the PIL mode.
void lookout_image_decode_pil(const uint8_t *data, size_t size, long long max_pixels, lookout_decoded *result,
                              int *mode);

/// `lookout_image_decode` of a JPEG at 1/8, 1/4 or 1/2 of its size (libjpeg's DCT scaling, the dimensions rounded
/// up) where the decoded image keeps at least `long_side` pixels on its long side and `short_side` on its short one,
/// else whole; other formats whole. `full_width` and `full_height` receive the file's own size (before EXIF
/// orientation, as `result`'s).
void lookout_image_decode_reduced(const uint8_t *data, size_t size, long long max_pixels, int long_side,
                                  int short_side, lookout_decoded *result, int *full_width, int *full_height);

/// The PIL mode `lookout_image_decode_pil` gives a JPEG (RGB, L for one component, CMYK for four), from its header
/// alone; -1 when the bytes are not a JPEG whose header reads. For a JPEG the two decoders make the same call, so
/// the RGBA pixels PIL's path gives are the BGR pixels of `lookout_image_decode` reordered
/// (`lookout_bgr_to_rgba`): a photo decoded once serves the detector and a whole-photo tower.
int lookout_jpeg_pil_mode(const uint8_t *data, size_t size);

/// `count` BGR pixels as RGBA with alpha 255.
void lookout_bgr_to_rgba(const uint8_t *bgr, size_t count, uint8_t *rgba);

/// PIL's horizontal 8-bit resampling pass (`ImagingResampleHorizontal_8bpc`) of `rows` rows of RGBA pixels
/// `in_width` wide to `out_width`: output x reads `count[x]` pixels from `start[x]` with the 22-bit fixed-point
/// weights `weights[x * stride ...]`. The vector and portable code give the same bytes
/// (`lookout_resize_portable_only`).
void lookout_pil_resample_horizontal(const uint8_t *in, int in_width, int rows, int out_width,
                                     const int32_t *start, const int32_t *count, const int32_t *weights,
                                     int stride, uint8_t *out);

/// PIL's vertical pass (`ImagingResampleVertical_8bpc`): output row y reads `count[y]` rows of `in` from row
/// `start[y]`, RGBA pixels `width` wide.
void lookout_pil_resample_vertical(const uint8_t *in, int width, int out_height, const int32_t *start,
                                   const int32_t *count, const int32_t *weights, int stride, uint8_t *out);

/// Result of encoding: the bytes of a JPEG or PNG file.
typedef struct {
    uint8_t *bytes;  /// malloc'ed; free with lookout_codecs_free
    size_t size;
    char error[256];  /// empty on success
} lookout_encoded;

/// Encodes BGR pixels (8 bits, rows top to bottom) as a baseline JPEG, 4:2:0, at `quality` (1–100).
void lookout_jpeg_encode(const uint8_t *bgr, int width, int height, int quality, lookout_encoded *result);

/// Encodes BGR pixels as an 8-bit RGB PNG.
void lookout_png_encode(const uint8_t *bgr, int width, int height, lookout_encoded *result);

void lookout_codecs_free(void *pointer);

/// The loops of OpenCV's fixed-point bilinear resize (INTER_LINEAR on 8-bit images), the coefficients given:
/// per target column its source column (in pixels) and weights (sum 2048), columns from `xmax` on taking the
/// border pixel times 2048; per target row its two source rows and weights. Same integer arithmetic as
/// cv::resize: horizontal sums in int32, then ((r0 >> 4) · β0 >> 16) + ((r1 >> 4) · β1 >> 16) + 2 >> 2.
void lookout_resize_bilinear(const uint8_t *source, int width, int height, int channels, uint8_t *target,
                             int target_width, int target_height, const int32_t *source_x, const int32_t *alpha0,
                             const int32_t *alpha1, int xmax, const int32_t *top, const int32_t *bottom,
                             const int32_t *beta0, const int32_t *beta1);
/* For tests: with `on` = 1 the resize and the letterbox run their portable C only (no AVX2 or AVX-512), with 0
   the best the CPU has (the default); −1 leaves it. Returns the setting now in force. */
int lookout_resize_portable_only(int on);

/* Rows [row_begin, row_end) of the letterboxed network input `out` (three out_width × out_height planes, RGB, in
   [0, 1]): outside the image (rows from `pad_top`, columns from `pad_left`) `pad / 255`; inside, the image's row
   (`resize` 0: `source` is already resized_width × resized_height) or its bilinear resize as
   `lookout_resize_bilinear` computes it, channels reversed (BGR → RGB), each byte / 255. Bands of rows can run at
   once. Returns 0 when memory runs out. */
int lookout_letterbox_rows(const uint8_t *source, int width, int height, int channels, int resize,
                           int resized_width, int resized_height, const int32_t *source_x, const int32_t *alpha0,
                           const int32_t *alpha1, int xmax, const int32_t *top, const int32_t *bottom,
                           const int32_t *beta0, const int32_t *beta1, int pad_top, int pad_left, int out_width,
                           int out_height, uint8_t pad, int row_begin, int row_end, float *out);
#endif
