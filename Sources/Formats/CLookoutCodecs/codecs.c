#include "lookout_codecs.h"

#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

static int is_png(const uint8_t *data, size_t size) { return size >= 8 && png_sig_cmp(data, 0, 8) == 0; }
static int is_jpeg(const uint8_t *data, size_t size) { return size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF; }

void lookout_codecs_free(void *pointer) { free(pointer); }

/* ---------- PNG (libpng's classic API; its longjmp errors stay inside this file) ---------- */

typedef struct {
    const uint8_t *data;
    size_t size;
    size_t offset;
} png_source;

static void png_read_memory(png_structp png, png_bytep target, png_size_t count) {
    png_source *source = (png_source *)png_get_io_ptr(png);
    if (count > source->size - source->offset) png_error(png, "file is truncated");
    memcpy(target, source->data + source->offset, count);
    source->offset += count;
}

typedef struct {
    char *message;
    size_t size;
} png_messages;

static void png_on_error(png_structp png, png_const_charp message) {
    png_messages *messages = (png_messages *)png_get_error_ptr(png);
    snprintf(messages->message, messages->size, "PNG: %s", message);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp message) {
    (void)png;
    (void)message;
}

static int png_decode(const uint8_t *data, size_t size, long long max_pixels, lookout_decoded *result, int header_only,
                      int *pil_mode) {
    png_messages messages = {result->error, sizeof result->error};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &messages, png_on_error, png_on_warning);
    if (!png) {
        snprintf(result->error, sizeof result->error, "PNG: out of memory");
        return -1;
    }
    png_infop info = png_create_info_struct(png);
    png_bytep volatile pixels = NULL;
    png_bytepp volatile rows = NULL;
    png_source source = {data, size, 0};
    if (!info || setjmp(png_jmpbuf(png))) {
        free(pixels);
        free(rows);
        png_destroy_read_struct(&png, info ? &info : NULL, NULL);
        if (!result->error[0]) snprintf(result->error, sizeof result->error, "PNG: cannot decode");
        return -1;
    }
    png_set_read_fn(png, &source, png_read_memory);
    png_set_user_limits(png, 1000000, 1000000);
    png_read_info(png, info);
    png_uint_32 width = png_get_image_width(png, info), height = png_get_image_height(png, info);
    result->width = (int)width;
    result->height = (int)height;
    if ((long long)width * (long long)height > max_pixels) {
        snprintf(result->error, sizeof result->error, "image of %ux%u pixels is over the %lld-pixel limit", width, height, max_pixels);
        png_destroy_read_struct(&png, &info, NULL);
        return -1;
    }
    if (header_only) {
        png_destroy_read_struct(&png, &info, NULL);
        return 0;
    }
    int color = png_get_color_type(png, info);
    int depth = png_get_bit_depth(png, info);
    if (depth == 16) png_set_strip_16(png);
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
    int channels = 3;
    if (pil_mode) {
        /* As PIL opens it: the mode says how CLIP's preprocessing resizes; a tRNS chunk is ignored (PIL keeps it
           aside and convert("RGB") drops it); pixels come out RGBA, alpha 255 where the file has none. */
        switch (color) {
            case PNG_COLOR_TYPE_GRAY: *pil_mode = depth == 1 ? LOOKOUT_MODE_1 : depth == 16 ? LOOKOUT_MODE_I16 : LOOKOUT_MODE_L; break;
            case PNG_COLOR_TYPE_GRAY_ALPHA: *pil_mode = LOOKOUT_MODE_LA; break;
            case PNG_COLOR_TYPE_PALETTE: *pil_mode = LOOKOUT_MODE_P; break;
            case PNG_COLOR_TYPE_RGB_ALPHA: *pil_mode = LOOKOUT_MODE_RGBA; break;
            default: *pil_mode = LOOKOUT_MODE_RGB; break;
        }
        if (!(color & PNG_COLOR_MASK_ALPHA)) png_set_filler(png, 0xFF, PNG_FILLER_AFTER);
        channels = 4;
    } else {
        if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
        png_set_strip_alpha(png);
        png_set_bgr(png);
    }
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != (size_t)width * channels) png_error(png, "unexpected row layout");
    pixels = (png_bytep)malloc((size_t)width * height * channels);
    rows = (png_bytepp)malloc(sizeof(png_bytep) * height);
    if (!pixels || !rows) png_error(png, "out of memory");
    for (png_uint_32 y = 0; y < height; y++) rows[y] = pixels + (size_t)y * width * channels;
    png_read_image(png, rows);
    png_read_end(png, NULL);
    free(rows);
    png_destroy_read_struct(&png, &info, NULL);
    result->pixels = pixels;
    return 0;
}

/* ---------- JPEG (TurboJPEG) ---------- */

static int jpeg_decode_scaled(const uint8_t *data, size_t size, long long max_pixels, lookout_decoded *result,
                              int header_only, int long_side, int short_side, int *full_width, int *full_height);

static int jpeg_decode(const uint8_t *data, size_t size, long long max_pixels, lookout_decoded *result, int header_only) {
    return jpeg_decode_scaled(data, size, max_pixels, result, header_only, 0, 0, NULL, NULL);
}

/* The JPEG at 1/8, 1/4 or 1/2 of its size (libjpeg's DCT scaling: TJSCALED rounds up) where the image stays at
 * least `long_side` on its long side and `short_side` on its short one; whole (0, 0: always). `result` holds the
 * decoded size; the file's own size comes back through `full_width` and `full_height` where they are given. */
static int jpeg_decode_scaled(const uint8_t *data, size_t size, long long max_pixels, lookout_decoded *result,
                              int header_only, int long_side, int short_side, int *full_width, int *full_height) {
    tjhandle handle = tjInitDecompress();
    if (!handle) {
        snprintf(result->error, sizeof result->error, "JPEG: cannot start the decoder");
        return -1;
    }
    int width = 0, height = 0, subsampling = 0, colorspace = 0;
    if (tjDecompressHeader3(handle, data, (unsigned long)size, &width, &height, &subsampling, &colorspace) != 0) {
        snprintf(result->error, sizeof result->error, "JPEG: %s", tjGetErrorStr2(handle));
        tjDestroy(handle);
        return -1;
    }
    result->width = width;
    result->height = height;
    if ((long long)width * (long long)height > max_pixels) {
        snprintf(result->error, sizeof result->error, "image of %dx%d pixels is over the %lld-pixel limit", width, height, max_pixels);
        tjDestroy(handle);
        return -1;
    }
    if (header_only) {
        tjDestroy(handle);
        return 0;
    }
    if (full_width) *full_width = width;
    if (full_height) *full_height = height;
    if (long_side > 0 || short_side > 0) {
        int full_long = width > height ? width : height, full_short = width > height ? height : width;
        for (int denominator = 8; denominator >= 2; denominator /= 2) {
            if ((full_long + denominator - 1) / denominator >= long_side &&
                (full_short + denominator - 1) / denominator >= short_side) {
                width = (width + denominator - 1) / denominator;
                height = (height + denominator - 1) / denominator;
                break;
            }
        }
    }
    int cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
    int channels = cmyk ? 4 : 3;
    uint8_t *buffer = (uint8_t *)malloc((size_t)width * height * channels);
    if (!buffer) {
        snprintf(result->error, sizeof result->error, "JPEG: out of memory");
        tjDestroy(handle);
        return -1;
    }
    int status = tjDecompress2(handle, data, (unsigned long)size, buffer, width, 0, height, cmyk ? TJPF_CMYK : TJPF_BGR,
                               0 /* accurate integer IDCT, fancy upsampling: libjpeg defaults, as OpenCV */);
    /* Warnings are accepted (OpenCV decodes through them), except a premature end: the file is cut. */
    if (status != 0 && (tjGetErrorCode(handle) == TJERR_FATAL || strstr(tjGetErrorStr2(handle), "Premature end"))) {
        snprintf(result->error, sizeof result->error, "JPEG: %s (file truncated or corrupt)", tjGetErrorStr2(handle));
        free(buffer);
        tjDestroy(handle);
        return -1;
    }
    tjDestroy(handle);
    if (cmyk) {
        /* Inverted (Adobe) CMYK, converted as OpenCV does: channel = k − (255 − channel)·k / 256. */
        uint8_t *bgr = (uint8_t *)malloc((size_t)width * height * 3);
        if (!bgr) {
            free(buffer);
            snprintf(result->error, sizeof result->error, "JPEG: out of memory");
            return -1;
        }
        for (size_t p = 0; p < (size_t)width * height; p++) {
            int c = buffer[4 * p], m = buffer[4 * p + 1], y = buffer[4 * p + 2], k = buffer[4 * p + 3];
            bgr[3 * p + 2] = (uint8_t)(k - ((255 - c) * k >> 8));
            bgr[3 * p + 1] = (uint8_t)(k - ((255 - m) * k >> 8));
            bgr[3 * p + 0] = (uint8_t)(k - ((255 - y) * k >> 8));
        }
        free(buffer);
        buffer = bgr;
    }
    result->pixels = buffer;
    result->width = width;
    result->height = height;
    return 0;
}

void lookout_image_decode_reduced(const uint8_t *data, size_t size, long long max_pixels, int long_side,
                                  int short_side, lookout_decoded *result, int *full_width, int *full_height) {
    memset(result, 0, sizeof *result);
    *full_width = *full_height = 0;
    if (is_jpeg(data, size)) {
        jpeg_decode_scaled(data, size, max_pixels, result, 0, long_side, short_side, full_width, full_height);
        return;
    }
    lookout_image_decode(data, size, max_pixels, result);
    *full_width = result->width;
    *full_height = result->height;
}

int lookout_image_size(const uint8_t *data, size_t size, int *width, int *height, char *error, size_t error_size) {
    lookout_decoded result;
    memset(&result, 0, sizeof result);
    int status;
    if (is_png(data, size)) {
        status = png_decode(data, size, (long long)1 << 62, &result, 1, NULL);
    } else if (is_jpeg(data, size)) {
        status = jpeg_decode(data, size, (long long)1 << 62, &result, 1);
    } else {
        snprintf(result.error, sizeof result.error, "not a JPEG or PNG file");
        status = -1;
    }
    *width = result.width;
    *height = result.height;
    if (error && error_size) snprintf(error, error_size, "%s", result.error);
    return status;
}

void lookout_image_decode(const uint8_t *data, size_t size, long long max_pixels, lookout_decoded *result) {
    memset(result, 0, sizeof *result);
    if (is_png(data, size)) {
        png_decode(data, size, max_pixels, result, 0, NULL);
    } else if (is_jpeg(data, size)) {
        jpeg_decode(data, size, max_pixels, result, 0);
    } else {
        snprintf(result->error, sizeof result->error, "not a JPEG or PNG file (unsupported format)");
    }
}

void lookout_image_decode_pil(const uint8_t *data, size_t size, long long max_pixels, lookout_decoded *result,
                              int *mode) {
    memset(result, 0, sizeof *result);
    *mode = LOOKOUT_MODE_RGB;
    if (is_png(data, size)) {
        png_decode(data, size, max_pixels, result, 0, mode);
        return;
    }
    if (!is_jpeg(data, size)) {
        snprintf(result->error, sizeof result->error, "not a JPEG or PNG file (unsupported format)");
        return;
    }
    if (jpeg_decode(data, size, max_pixels, result, 0) != 0) return;
    int jpeg_mode = lookout_jpeg_pil_mode(data, size);
    if (jpeg_mode >= 0) *mode = jpeg_mode;
    size_t count = (size_t)result->width * result->height;
    uint8_t *rgba = (uint8_t *)malloc(count * 4);
    if (!rgba) {
        free(result->pixels);
        result->pixels = NULL;
        snprintf(result->error, sizeof result->error, "JPEG: out of memory");
        return;
    }
    lookout_bgr_to_rgba(result->pixels, count, rgba);
    free(result->pixels);
    result->pixels = rgba;
}

int lookout_jpeg_pil_mode(const uint8_t *data, size_t size) {
    if (!is_jpeg(data, size)) return -1;
    /* The JPEG's colour space, as PIL names the mode it opens: L for one component, CMYK for four. */
    tjhandle handle = tjInitDecompress();
    if (!handle) return -1;
    int width = 0, height = 0, subsampling = 0, colorspace = 0, mode = -1;
    if (tjDecompressHeader3(handle, data, (unsigned long)size, &width, &height, &subsampling, &colorspace) == 0) {
        mode = LOOKOUT_MODE_RGB;
        if (colorspace == TJCS_GRAY) mode = LOOKOUT_MODE_L;
        if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) mode = LOOKOUT_MODE_CMYK;
    }
    tjDestroy(handle);
    return mode;
}

void lookout_bgr_to_rgba(const uint8_t *bgr, size_t count, uint8_t *rgba) {
    for (size_t p = 0; p < count; p++) {
        rgba[4 * p] = bgr[3 * p + 2];
        rgba[4 * p + 1] = bgr[3 * p + 1];
        rgba[4 * p + 2] = bgr[3 * p];
        rgba[4 * p + 3] = 255;
    }
}

// ------------------------------------------------------------------------------------------------ encoding

void lookout_jpeg_encode(const uint8_t *bgr, int width, int height, int quality, lookout_encoded *result) {
    memset(result, 0, sizeof(*result));
    tjhandle handle = tjInitCompress();
    if (!handle) {
        snprintf(result->error, sizeof(result->error), "cannot start the JPEG encoder");
        return;
    }
    unsigned char *out = NULL;
    unsigned long size = 0;
    if (tjCompress2(handle, bgr, width, width * 3, height, TJPF_BGR, &out, &size, TJSAMP_420, quality,
                    TJFLAG_ACCURATEDCT) != 0) {
        snprintf(result->error, sizeof(result->error), "JPEG encoding failed: %s", tjGetErrorStr2(handle));
        if (out) tjFree(out);
        tjDestroy(handle);
        return;
    }
    result->bytes = malloc(size ? size : 1);
    if (!result->bytes) {
        snprintf(result->error, sizeof(result->error), "out of memory");
    } else {
        memcpy(result->bytes, out, size);
        result->size = size;
    }
    tjFree(out);
    tjDestroy(handle);
}

typedef struct {
    uint8_t *bytes;
    size_t size, capacity;
    int failed;
} png_sink;

static void png_write_memory(png_structp png, png_bytep data, png_size_t count) {
    png_sink *sink = png_get_io_ptr(png);
    if (sink->failed) return;
    if (sink->size + count > sink->capacity) {
        size_t capacity = sink->capacity ? sink->capacity * 2 : 65536;
        while (capacity < sink->size + count) capacity *= 2;
        uint8_t *grown = realloc(sink->bytes, capacity);
        if (!grown) {
            sink->failed = 1;
            return;
        }
        sink->bytes = grown;
        sink->capacity = capacity;
    }
    memcpy(sink->bytes + sink->size, data, count);
    sink->size += count;
}

static void png_flush_memory(png_structp png) { (void)png; }

void lookout_png_encode(const uint8_t *bgr, int width, int height, lookout_encoded *result) {
    memset(result, 0, sizeof(*result));
    png_sink sink = {0};
    png_messages messages = {result->error, sizeof(result->error)};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &messages, png_on_error, png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        snprintf(result->error, sizeof(result->error), "cannot start the PNG encoder");
        png_destroy_write_struct(&png, &info);
        return;
    }
    if (setjmp(png_jmpbuf(png))) {
        if (!result->error[0]) snprintf(result->error, sizeof(result->error), "PNG encoding failed");
        png_destroy_write_struct(&png, &info);
        free(sink.bytes);
        return;
    }
    png_set_write_fn(png, &sink, png_write_memory, png_flush_memory);
    png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_set_bgr(png);
    png_write_info(png, info);
    for (int y = 0; y < height; y++) png_write_row(png, (png_const_bytep)(bgr + (size_t)y * width * 3));
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    if (sink.failed) {
        snprintf(result->error, sizeof(result->error), "out of memory");
        free(sink.bytes);
        return;
    }
    result->bytes = sink.bytes;
    result->size = sink.size;
}

static void resize_horizontal(const uint8_t *line, int channels, int target_width, const int32_t *source_x,
                              const int32_t *alpha0, const int32_t *alpha1, int xmax, int32_t *out) {
    if (channels == 3) {
        for (int dx = 0; dx < xmax; dx++) {
            const uint8_t *s = line + source_x[dx] * 3;
            int32_t a0 = alpha0[dx], a1 = alpha1[dx];
            out[dx * 3] = s[0] * a0 + s[3] * a1;
            out[dx * 3 + 1] = s[1] * a0 + s[4] * a1;
            out[dx * 3 + 2] = s[2] * a0 + s[5] * a1;
        }
    } else {
        for (int dx = 0; dx < xmax; dx++) {
            const uint8_t *s = line + source_x[dx] * channels;
            for (int c = 0; c < channels; c++) out[dx * channels + c] = s[c] * alpha0[dx] + s[channels + c] * alpha1[dx];
        }
    }
    for (int dx = xmax; dx < target_width; dx++) {
        const uint8_t *s = line + source_x[dx] * channels;
        for (int c = 0; c < channels; c++) out[dx * channels + c] = s[c] * 2048;
    }
}

/* resize_horizontal for three channels, the sums in three planes of `target_width` (channel c of pixel dx at
   out[c · target_width + dx]): the letterbox's layout, which its planes of floats then read in order. */
static void resize_horizontal_planar(const uint8_t *line, int target_width, const int32_t *source_x,
                                     const int32_t *alpha0, const int32_t *alpha1, int from, int xmax, int32_t *out) {
    int32_t *b = out, *g = out + target_width, *r = out + 2 * target_width;
    for (int dx = from; dx < xmax; dx++) {
        const uint8_t *s = line + source_x[dx] * 3;
        int32_t a0 = alpha0[dx], a1 = alpha1[dx];
        b[dx] = s[0] * a0 + s[3] * a1;
        g[dx] = s[1] * a0 + s[4] * a1;
        r[dx] = s[2] * a0 + s[5] * a1;
    }
    for (int dx = xmax > from ? xmax : from; dx < target_width; dx++) {
        const uint8_t *s = line + source_x[dx] * 3;
        b[dx] = s[0] * 2048;
        g[dx] = s[1] * 2048;
        r[dx] = s[2] * 2048;
    }
}

#if defined(__x86_64__)
#include <immintrin.h>
/* resize_horizontal_planar, sixteen target pixels at a time below `xmax`: two gathers of four bytes per pixel,
   at its source offset (bytes 0–3: B G R of the left pixel, B of the right) and two further (bytes 2–5: its
   R, then B G R of the right pixel), both inside the six bytes the scalar code reads. The same products. */
__attribute__((target("avx512f"))) static void resize_horizontal_planar_avx512(const uint8_t *line,
                                                                              int target_width,
                                                                              const int32_t *source_x,
                                                                              const int32_t *alpha0,
                                                                              const int32_t *alpha1, int xmax,
                                                                              int32_t *out) {
    __m512i low = _mm512_set1_epi32(255);
    int dx = 0;
    for (; dx + 16 <= xmax; dx += 16) {
        __m512i x = _mm512_loadu_si512((const void *)(source_x + dx));
        __m512i offset = _mm512_add_epi32(_mm512_add_epi32(x, x), x);
        __m512i left = _mm512_i32gather_epi32(offset, (const void *)line, 1);
        __m512i right = _mm512_i32gather_epi32(offset, (const void *)(line + 2), 1);
        __m512i a0 = _mm512_loadu_si512((const void *)(alpha0 + dx));
        __m512i a1 = _mm512_loadu_si512((const void *)(alpha1 + dx));
        __m512i b = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_and_si512(left, low), a0),
                                     _mm512_mullo_epi32(_mm512_and_si512(_mm512_srli_epi32(right, 8), low), a1));
        __m512i g = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_and_si512(_mm512_srli_epi32(left, 8), low), a0),
                                     _mm512_mullo_epi32(_mm512_and_si512(_mm512_srli_epi32(right, 16), low), a1));
        __m512i r = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_and_si512(_mm512_srli_epi32(left, 16), low), a0),
                                     _mm512_mullo_epi32(_mm512_srli_epi32(right, 24), a1));
        _mm512_storeu_si512((void *)(out + dx), b);
        _mm512_storeu_si512((void *)(out + target_width + dx), g);
        _mm512_storeu_si512((void *)(out + 2 * target_width + dx), r);
    }
    resize_horizontal_planar(line, target_width, source_x, alpha0, alpha1, dx, xmax, out);
}

/* Bytes / 255 as floats, sixteen at a time (the same division); returns how many it did. */
__attribute__((target("avx512f"))) static int scaled_avx512(const uint8_t *bytes, int count, float *target) {
    __m512 divisor = _mm512_set1_ps(255.0f);
    int x = 0;
    for (; x + 16 <= count; x += 16) {
        __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(bytes + x)));
        _mm512_storeu_ps(target + x, _mm512_div_ps(_mm512_cvtepi32_ps(v), divisor));
    }
    return x;
}
static int resize_avx512_available(void) {
    return __builtin_cpu_supports("avx512f") && getenv("LOOKOUT_NO_AVX512") == NULL;
}

/* The vertical blend of 32 values at a time (the same integer arithmetic); returns how many it did. */
__attribute__((target("avx2"))) static size_t resize_vertical_avx2(const int32_t *row0, const int32_t *row1,
                                                                   int32_t b0, int32_t b1, uint8_t *line,
                                                                   size_t count) {
    __m256i beta0 = _mm256_set1_epi32(b0), beta1 = _mm256_set1_epi32(b1), two = _mm256_set1_epi32(2);
    size_t i = 0;
    for (; i + 32 <= count; i += 32) {
        __m256i v[4];
        for (int k = 0; k < 4; k++) {
            __m256i r0 = _mm256_srai_epi32(_mm256_loadu_si256((const __m256i *)(row0 + i + 8 * k)), 4);
            __m256i r1 = _mm256_srai_epi32(_mm256_loadu_si256((const __m256i *)(row1 + i + 8 * k)), 4);
            __m256i sum = _mm256_add_epi32(_mm256_srai_epi32(_mm256_mullo_epi32(r0, beta0), 16),
                                           _mm256_srai_epi32(_mm256_mullo_epi32(r1, beta1), 16));
            v[k] = _mm256_srai_epi32(_mm256_add_epi32(sum, two), 2);
        }
        /* Saturating packs (as the scalar clamp), then the lanes back in order. */
        __m256i w01 = _mm256_packs_epi32(v[0], v[1]), w23 = _mm256_packs_epi32(v[2], v[3]);
        __m256i bytes = _mm256_packus_epi16(w01, w23);
        bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(line + i), bytes);
    }
    return i;
}
static int resize_avx2_available(void) { return __builtin_cpu_supports("avx2"); }
#endif

/* The two horizontally resized source rows the last target row used (int32 sums), kept for the next. */
typedef struct {
    int32_t *memory; /* both rows' allocation (row0 and row1 swap within it) */
    int32_t *row0, *row1;
    int cached0, cached1;
    int avx2, avx512;
    int planar; /* three channels in three planes (resize_horizontal_planar), for the letterbox */
} resize_rows;

/* Source row `y` resized horizontally into `out`, in the cache's layout. */
static void horizontal(const uint8_t *source, int width, int channels, int target_width, const int32_t *source_x,
                       const int32_t *alpha0, const int32_t *alpha1, int xmax, int y, const resize_rows *cache,
                       int32_t *out) {
    const uint8_t *line = source + (size_t)y * width * channels;
    if (!cache->planar) {
        resize_horizontal(line, channels, target_width, source_x, alpha0, alpha1, xmax, out);
        return;
    }
#if defined(__x86_64__)
    if (cache->avx512) {
        resize_horizontal_planar_avx512(line, target_width, source_x, alpha0, alpha1, xmax, out);
        return;
    }
#endif
    resize_horizontal_planar(line, target_width, source_x, alpha0, alpha1, 0, xmax, out);
}

/* Target row `dy` of the bilinear resize into `line` (target_width × channels bytes). */
static void resized_line(const uint8_t *source, int width, int channels, int target_width, const int32_t *source_x,
                         const int32_t *alpha0, const int32_t *alpha1, int xmax, const int32_t *top,
                         const int32_t *bottom, const int32_t *beta0, const int32_t *beta1, int dy,
                         resize_rows *cache, uint8_t *line) {
    size_t count = (size_t)target_width * channels;
    if (cache->cached0 != top[dy]) {
        if (cache->cached1 == top[dy]) {
            int32_t *swap = cache->row0;
            cache->row0 = cache->row1;
            cache->row1 = swap;
            cache->cached1 = -1;
        } else {
            horizontal(source, width, channels, target_width, source_x, alpha0, alpha1, xmax, top[dy], cache,
                       cache->row0);
        }
        cache->cached0 = top[dy];
    }
    if (cache->cached1 != bottom[dy] || cache->cached1 == -1) {
        horizontal(source, width, channels, target_width, source_x, alpha0, alpha1, xmax, bottom[dy], cache,
                   cache->row1);
        cache->cached1 = bottom[dy];
    }
    const int32_t *row0 = cache->row0, *row1 = cache->row1;
    int32_t b0 = beta0[dy], b1 = beta1[dy];
    size_t i = 0;
#if defined(__x86_64__)
    if (cache->avx2) i = resize_vertical_avx2(row0, row1, b0, b1, line, count);
#endif
    for (; i < count; i++) {
        int32_t value = (((row0[i] >> 4) * b0) >> 16) + (((row1[i] >> 4) * b1) >> 16) + 2;
        value >>= 2;
        line[i] = (uint8_t)(value < 0 ? 0 : value > 255 ? 255 : value);
    }
}

static atomic_int resize_portable_only = 0;

int lookout_resize_portable_only(int on) {
    if (on >= 0) atomic_store(&resize_portable_only, on != 0);
    return atomic_load(&resize_portable_only);
}

static int resize_rows_start(resize_rows *cache, size_t count) {
    cache->memory = cache->row0 = malloc(sizeof(int32_t) * 2 * count);
    cache->row1 = cache->row0 ? cache->row0 + count : NULL;
    cache->cached0 = cache->cached1 = -1;
    cache->planar = 0;
#if defined(__x86_64__)
    int portable = atomic_load(&resize_portable_only);
    cache->avx2 = !portable && resize_avx2_available();
    cache->avx512 = !portable && resize_avx512_available();
#else
    cache->avx2 = cache->avx512 = 0;
#endif
    return cache->memory != NULL;
}

/* ---------- PIL's 8-bit resampling passes (CLIP's preprocessing) ----------
 * ImagingResampleHorizontal_8bpc and ImagingResampleVertical_8bpc on RGBA: per output pixel and channel,
 * (1 << 21) + Σ pixel·weight in 32-bit integers, shifted by 22 and clipped to a byte. Integer sums are exact in
 * any order, so the vector code gives the portable code's bytes. */

static inline uint8_t pil_clip8(int32_t sum) {
    int32_t value = sum >> 22;
    return (uint8_t)(value < 0 ? 0 : value > 255 ? 255 : value);
}

#if defined(__x86_64__)
/* One output pixel of the horizontal pass: two taps a step (8 lanes: 2 pixels × 4 channels), `expanded` holding
 * each weight four times. */
__attribute__((target("avx2"))) static void pil_horizontal_avx2(const uint8_t *row, const int32_t *start,
                                                                const int32_t *count, const int32_t *expanded,
                                                                int stride, int out_width, uint8_t *out) {
    for (int x = 0; x < out_width; x++) {
        const uint8_t *p = row + (size_t)start[x] * 4;
        const int32_t *k = expanded + (size_t)x * stride * 4;
        int n = count[x], i = 0;
        __m256i acc = _mm256_setzero_si256();
        for (; i + 2 <= n; i += 2) {
            __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 4 * i)));
            acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(v, _mm256_loadu_si256((const __m256i *)(k + 4 * i))));
        }
        __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
        if (i < n) {
            int32_t word;
            memcpy(&word, p + 4 * i, 4);
            __m128i v = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(word));
            sum = _mm_add_epi32(sum, _mm_mullo_epi32(v, _mm_loadu_si128((const __m128i *)(k + 4 * i))));
        }
        sum = _mm_srai_epi32(_mm_add_epi32(sum, _mm_set1_epi32(1 << 21)), 22);
        __m128i bytes = _mm_packus_epi16(_mm_packs_epi32(sum, sum), _mm_setzero_si128());
        int32_t word = _mm_cvtsi128_si32(bytes);
        memcpy(out + (size_t)x * 4, &word, 4);
    }
}

/* The vertical pass of 8 pixels (32 bytes) at a time along an output row; returns how many bytes it did. */
__attribute__((target("avx2"))) static size_t pil_vertical_avx2(const uint8_t *first, size_t pitch,
                                                                const int32_t *k, int n, size_t bytes,
                                                                uint8_t *out) {
    size_t x = 0;
    for (; x + 32 <= bytes; x += 32) {
        __m256i acc[4];
        for (int q = 0; q < 4; q++) acc[q] = _mm256_set1_epi32(1 << 21);
        for (int i = 0; i < n; i++) {
            const uint8_t *p = first + (size_t)i * pitch + x;
            __m256i w = _mm256_set1_epi32(k[i]);
            for (int q = 0; q < 4; q++) {
                __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 8 * q)));
                acc[q] = _mm256_add_epi32(acc[q], _mm256_mullo_epi32(v, w));
            }
        }
        for (int q = 0; q < 4; q++) acc[q] = _mm256_srai_epi32(acc[q], 22);
        __m256i w01 = _mm256_packs_epi32(acc[0], acc[1]), w23 = _mm256_packs_epi32(acc[2], acc[3]);
        __m256i packed = _mm256_packus_epi16(w01, w23);
        packed = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(out + x), packed);
    }
    return x;
}
#endif

static int pil_vector(void) {
#if defined(__x86_64__)
    return !atomic_load(&resize_portable_only) && resize_avx2_available();
#else
    return 0;
#endif
}

void lookout_pil_resample_horizontal(const uint8_t *in, int in_width, int rows, int out_width,
                                     const int32_t *start, const int32_t *count, const int32_t *weights,
                                     int stride, uint8_t *out) {
    int32_t *expanded = NULL;
#if defined(__x86_64__)
    if (pil_vector()) expanded = malloc(sizeof(int32_t) * 4 * (size_t)out_width * stride);
    if (expanded) {
        for (size_t w = 0; w < (size_t)out_width * stride; w++)
            for (int c = 0; c < 4; c++) expanded[4 * w + c] = weights[w];
        for (int y = 0; y < rows; y++)
            pil_horizontal_avx2(in + (size_t)y * in_width * 4, start, count, expanded, stride, out_width,
                                out + (size_t)y * out_width * 4);
        free(expanded);
        return;
    }
#endif
    for (int y = 0; y < rows; y++) {
        const uint8_t *row = in + (size_t)y * in_width * 4;
        for (int x = 0; x < out_width; x++) {
            const uint8_t *p = row + (size_t)start[x] * 4;
            const int32_t *k = weights + (size_t)x * stride;
            int32_t s0 = 1 << 21, s1 = 1 << 21, s2 = 1 << 21, s3 = 1 << 21;
            for (int i = 0; i < count[x]; i++) {
                s0 += p[4 * i] * k[i];
                s1 += p[4 * i + 1] * k[i];
                s2 += p[4 * i + 2] * k[i];
                s3 += p[4 * i + 3] * k[i];
            }
            uint8_t *o = out + ((size_t)y * out_width + x) * 4;
            o[0] = pil_clip8(s0), o[1] = pil_clip8(s1), o[2] = pil_clip8(s2), o[3] = pil_clip8(s3);
        }
    }
}

void lookout_pil_resample_vertical(const uint8_t *in, int width, int out_height, const int32_t *start,
                                   const int32_t *count, const int32_t *weights, int stride, uint8_t *out) {
    size_t pitch = (size_t)width * 4;
    int vector = pil_vector();
    for (int y = 0; y < out_height; y++) {
        const uint8_t *first = in + (size_t)start[y] * pitch;
        const int32_t *k = weights + (size_t)y * stride;
        uint8_t *row = out + (size_t)y * pitch;
        size_t x = 0;
#if defined(__x86_64__)
        if (vector) x = pil_vertical_avx2(first, pitch, k, count[y], pitch, row);
#else
        (void)vector;
#endif
        for (; x < pitch; x++) {
            int32_t sum = 1 << 21;
            for (int i = 0; i < count[y]; i++) sum += first[(size_t)i * pitch + x] * k[i];
            row[x] = pil_clip8(sum);
        }
    }
}

void lookout_resize_bilinear(const uint8_t *source, int width, int height, int channels, uint8_t *target,
                             int target_width, int target_height, const int32_t *source_x, const int32_t *alpha0,
                             const int32_t *alpha1, int xmax, const int32_t *top, const int32_t *bottom,
                             const int32_t *beta0, const int32_t *beta1) {
    (void)height;
    size_t count = (size_t)target_width * channels;
    resize_rows cache;
    if (!resize_rows_start(&cache, count)) return;
    for (int dy = 0; dy < target_height; dy++)
        resized_line(source, width, channels, target_width, source_x, alpha0, alpha1, xmax, top, bottom, beta0, beta1,
                     dy, &cache, target + (size_t)dy * count);
    free(cache.memory);
}

/* The network input's planes from bytes: channel c of plane (RGB) from byte 2 − c (BGR), each byte / 255; the
   bytes interleaved (`channels` per pixel), or with `planar` in three planes of `count` (B, G, R). */
static void planar_scaled(const uint8_t *line, int channels, int planar, int avx512, int count, size_t plane,
                          float *out) {
    (void)avx512;
    for (int c = 0; c < 3; c++) {
        float *target = out + (size_t)c * plane;
        if (planar) {
            const uint8_t *source = line + (size_t)(2 - c) * count;
            int x = 0;
#if defined(__x86_64__)
            if (avx512) x = scaled_avx512(source, count, target);
#endif
            for (; x < count; x++) target[x] = (float)source[x] / 255.0f;
        } else {
            const uint8_t *source = line + (2 - c);
            for (int x = 0; x < count; x++) target[x] = (float)source[(size_t)x * channels] / 255.0f;
        }
    }
}

int lookout_letterbox_rows(const uint8_t *source, int width, int height, int channels, int resize,
                           int resized_width, int resized_height, const int32_t *source_x, const int32_t *alpha0,
                           const int32_t *alpha1, int xmax, const int32_t *top, const int32_t *bottom,
                           const int32_t *beta0, const int32_t *beta1, int pad_top, int pad_left, int out_width,
                           int out_height, uint8_t pad, int row_begin, int row_end, float *out) {
    (void)height;
    size_t plane = (size_t)out_width * out_height;
    size_t count = (size_t)resized_width * channels;
    resize_rows cache = {0};
    uint8_t *line = NULL;
    if (resize) {
        line = malloc(count);
        if (!line || !resize_rows_start(&cache, count)) {
            free(line);
            return 0;
        }
        cache.planar = channels == 3;
    }
    float padded = (float)pad / 255.0f;
    for (int y = row_begin; y < row_end; y++) {
        int dy = y - pad_top;
        float *row = out + (size_t)y * out_width;
        if (dy < 0 || dy >= resized_height) {
            for (int c = 0; c < 3; c++)
                for (int x = 0; x < out_width; x++) row[(size_t)c * plane + x] = padded;
            continue;
        }
        const uint8_t *bytes = source + (size_t)dy * count;
        if (resize) {
            resized_line(source, width, channels, resized_width, source_x, alpha0, alpha1, xmax, top, bottom, beta0,
                         beta1, dy, &cache, line);
            bytes = line;
        }
        for (int c = 0; c < 3; c++) {
            float *target = row + (size_t)c * plane;
            for (int x = 0; x < pad_left; x++) target[x] = padded;
            for (int x = pad_left + resized_width; x < out_width; x++) target[x] = padded;
        }
        planar_scaled(bytes, channels, cache.planar, cache.avx512, resized_width, plane, row + pad_left);
    }
    free(line);
    free(cache.memory);
    return 1;
}
