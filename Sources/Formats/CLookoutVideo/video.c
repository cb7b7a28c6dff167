// Video reading and writing over FFmpeg's libraries. Every failure becomes a sentence in the caller's
// buffer; nothing here prints (FFmpeg's own log is silenced below the error level). Built without the package's
// Video trait (LOOKOUT_VIDEO undefined), every opening fails with a sentence saying how to get video, and no
// FFmpeg library is needed.
#include "lookout_video.h"

#include <stdarg.h>
#include <stdio.h>

#ifndef LOOKOUT_VIDEO

static const char *const without_video =
    "this build of Lookout leaves out video (it was built without the Video trait, as with "
    "--disable-default-traits in the README's quick start). Build the full lookout: swift build -c release (or "
    "scripts/install; it needs Debian's FFmpeg: libavformat-dev libavcodec-dev libswscale-dev libavdevice-dev)";

static void refuse(char *error, size_t size) {
    if (error && size > 0) snprintf(error, size, "%s", without_video);
}

lookout_video *lookout_video_open(const char *path, int threads, double timeout, long long pixel_limit,
                                  lookout_video_info *info, char *error, size_t error_size) {
    (void)path, (void)threads, (void)timeout, (void)pixel_limit, (void)info;
    refuse(error, error_size);
    return NULL;
}

int lookout_video_next(lookout_video *video, uint8_t *bgr, double *time, char *error, size_t error_size) {
    (void)video, (void)bgr, (void)time;
    refuse(error, error_size);
    return -1;
}

int lookout_video_seek(lookout_video *video, double seconds, char *error, size_t error_size) {
    (void)video, (void)seconds;
    refuse(error, error_size);
    return -1;
}

void lookout_video_close(lookout_video *video) { (void)video; }

lookout_video_writer *lookout_video_writer_open(const char *path, int width, int height, double frame_rate, int crf,
                                                char *error, size_t error_size) {
    (void)path, (void)width, (void)height, (void)frame_rate, (void)crf;
    refuse(error, error_size);
    return NULL;
}

int lookout_video_writer_add(lookout_video_writer *writer, const uint8_t *bgr, double time, char *error,
                             size_t error_size) {
    (void)writer, (void)bgr, (void)time;
    refuse(error, error_size);
    return -1;
}

int lookout_video_writer_finish(lookout_video_writer *writer, char *error, size_t error_size) {
    (void)writer;
    refuse(error, error_size);
    return -1;
}

void lookout_video_writer_abandon(lookout_video_writer *writer) { (void)writer; }

#else

#include <errno.h>
#include <libavcodec/avcodec.h>
#include <libavdevice/avdevice.h>
#include <libavformat/avformat.h>
#include <libavutil/display.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void say(char *error, size_t size, const char *format, ...) {
    if (!error || size == 0) return;
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(error, size, format, arguments);
    va_end(arguments);
}

static const char *reason(int code, char *buffer, size_t size) {
    av_strerror(code, buffer, size);
    return buffer;
}

static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static void setup(void) {
    av_log_set_level(AV_LOG_FATAL);
    avdevice_register_all();
    avformat_network_init();
}

/// A network source's clock: FFmpeg asks `interrupted` while it waits on the network, and gives up (AVERROR_EXIT)
/// once the deadline has passed. The deadline is set before the open and before each read.
typedef struct {
    double deadline;  // seconds on the monotonic clock; 0: none
} network_clock;

static double monotonic(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec + now.tv_nsec / 1e9;
}

static int interrupted(void *opaque) {
    network_clock *clock = opaque;
    return clock->deadline > 0 && monotonic() > clock->deadline;
}

/// The URL's scheme, lower-cased, into `scheme` ("" for a path).
static void scheme_of(const char *path, char *scheme, size_t size) {
    const char *colon = strstr(path, "://");
    size_t length = colon ? (size_t)(colon - path) : 0;
    if (length >= size) length = 0;
    for (size_t i = 0; i < length; i++) {
        char c = path[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' || c == '-')) {
            length = 0;
            break;
        }
        scheme[i] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    scheme[length] = 0;
}

struct lookout_video {
    AVFormatContext *format;
    AVCodecContext *decoder;
    struct SwsContext *scaler;
    AVPacket *packet;
    AVFrame *frame;
    int stream;
    int width, height;
    AVRational time_base;
    int64_t start;
    double frame_rate;
    double stated_end;       // seconds from the start the container says the video lasts; 0 unknown
    long long stated_frames; // 0 unknown
    long long decoded;       // frames returned since the open or the last seek
    double last_time;
    int flushing, finished, sought, live;
    network_clock *clock;  // the deadline of the read in progress
    double timeout;        // seconds a read may wait
    long long pixel_limit; // 0: none
    int network;
    int pending;  // `packet` was refused for now (the decoder had frames to give first): send it again
    uint8_t *converted;  // swscale's output: rows of `stride` bytes and slack after them (it writes past a row's end)
    int stride;
};

/// The demuxers a local file or an upload may be read by: the containers phones, cameras and ffmpeg write. No
/// manifest, playlist or concatenation (DASH, HLS, ffconcat, SDP), which would name other files or URLs.
static const char local_formats[] = "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,avi,mpegts,mpeg,flv,ogg,asf";

/// The protocols a stream URL of `scheme` may use (the segments of an HLS playlist come over HTTP too); never
/// `file`, so a playlist or session description cannot reach the machine's own files.
static const char *stream_protocols(const char *scheme) {
    if (!strcmp(scheme, "rtsp") || !strcmp(scheme, "rtsps")) return "rtsp,rtsps,rtp,srtp,udp,tcp,tls";
    if (!strcmp(scheme, "http") || !strcmp(scheme, "https")) return "http,https,tcp,tls,crypto,httpproxy";
    if (!strcmp(scheme, "udp") || !strcmp(scheme, "rtp")) return "udp,rtp";
    if (!strcmp(scheme, "rtmp")) return "rtmp,rtmps,tcp,tls";
    if (!strcmp(scheme, "srt")) return "srt";
    return NULL;
}

/// Whether width×height is over `limit` pixels (0: no limit); then a sentence: "frames of W×H are over …" when
/// `opening`, "a frame of W×H is over …" for a frame met later.
static int over_pixel_limit(long long limit, int width, int height, int opening, char *error, size_t error_size) {
    if (limit <= 0 || (long long)width * height <= limit) return 0;
    say(error, error_size, opening ? "frames of %d×%d are over the %lld-pixel limit" : "a frame of %d×%d is over the %lld-pixel limit",
        width, height, limit);
    return 1;
}

lookout_video *lookout_video_open(const char *path, int threads, double timeout, long long pixel_limit,
                                  lookout_video_info *info, char *error, size_t error_size) {
    pthread_once(&setup_once, setup);
    memset(info, 0, sizeof *info);
    char why[128];
    const AVInputFormat *forced = NULL;
    int live = strncmp(path, "/dev/video", 10) == 0;
    if (live) {
        forced = av_find_input_format("video4linux2");
        if (!forced) {
            say(error, error_size, "this FFmpeg has no V4L2 camera input");
            return NULL;
        }
    }
    char scheme[16];
    scheme_of(path, scheme, sizeof scheme);
    int network = scheme[0] != 0;
    const char *protocols = network ? stream_protocols(scheme) : "file";
    if (!protocols) {
        say(error, error_size, "not a stream Lookout reads (%s://): rtsp, rtsps, http, https, udp, rtp, rtmp and srt are",
            scheme);
        return NULL;
    }
    int streaming = !strcmp(scheme, "rtsp") || !strcmp(scheme, "rtsps") || !strcmp(scheme, "rtmp") ||
                    !strcmp(scheme, "rtp") || !strcmp(scheme, "udp") || !strcmp(scheme, "srt");
    // A local name is opened through the file protocol whatever it looks like ("concat:a|b.mp4" is a file name).
    char *local = NULL;
    if (!network && !live) {
        size_t length = strlen(path);
        local = malloc(length + 6);
        if (!local) {
            say(error, error_size, "out of memory");
            return NULL;
        }
        memcpy(local, "file:", 5);
        memcpy(local + 5, path, length + 1);
    }
    AVFormatContext *format = avformat_alloc_context();
    AVDictionary *options = NULL;
    if (timeout <= 0) timeout = 10;
    // Every source has a clock: a network read waits at most `timeout` for data, a local file's open and each
    // read get the same budget, so that no input keeps a demuxer busy for ever.
    network_clock *clock = calloc(1, sizeof *clock);
    if (!format || !clock) {
        avformat_free_context(format);
        free(clock);
        free(local);
        say(error, error_size, "out of memory");
        return NULL;
    }
    format->interrupt_callback.callback = interrupted;
    format->interrupt_callback.opaque = clock;
    clock->deadline = monotonic() + timeout;
    av_dict_set(&options, "protocol_whitelist", protocols, 0);
    if (!network && !live) av_dict_set(&options, "format_whitelist", local_formats, 0);
    if (network) {
        char microseconds[32];
        snprintf(microseconds, sizeof microseconds, "%lld", (long long)(timeout * 1e6));
        if (!strcmp(scheme, "rtsp") || !strcmp(scheme, "rtsps")) {
            av_dict_set(&options, "rtsp_flags", "prefer_tcp", 0);
            av_dict_set(&options, "timeout", microseconds, 0);
        } else if (!strcmp(scheme, "udp")) {
            av_dict_set(&options, "timeout", microseconds, 0);
        } else {
            av_dict_set(&options, "rw_timeout", microseconds, 0);
        }
    }
    int status = avformat_open_input(&format, local ? local : path, forced, &options);
    av_dict_free(&options);
    free(local);
    if (status < 0) {
        // A demuxer cut short by the time limit may report its own error (RTSP: invalid data).
        if (status == AVERROR_EXIT || monotonic() > clock->deadline)
            say(error, error_size, network ? "no answer within %g s" : "not read within %g s", timeout);
        else if (!network && !live && status == AVERROR(EINVAL))
            say(error, error_size,
                "not a video container Lookout reads (MP4/MOV, Matroska/WebM, AVI, MPEG-TS/PS, FLV, Ogg, ASF; no "
                "manifests, playlists or concatenations)");
        else if (status == AVERROR_INVALIDDATA)
            say(error, error_size, "not a video FFmpeg can read (no known container format in it)");
        else if (live && status == AVERROR(ENOENT))
            say(error, error_size, "no such camera (V4L2 device)");
        else
            say(error, error_size, "cannot open: %s", reason(status, why, sizeof why));
        free(clock);
        return NULL;
    }
    // From here every failure closes what is open through `fail`.
    AVCodecContext *decoder = NULL;
    clock->deadline = monotonic() + timeout;
    status = avformat_find_stream_info(format, NULL);
    if (status < 0) {
        if (status == AVERROR_EXIT || monotonic() > clock->deadline)
            say(error, error_size, "no video within %g s", timeout);
        else
            say(error, error_size, "cannot read the streams: %s (truncated or damaged?)",
                reason(status, why, sizeof why));
        goto fail;
    }
    // A network stream with no stated end (RTSP, UDP, a live HLS playlist) is live: frames are dropped rather
    // than queued when the network runs ahead of the detector.
    if (streaming || (network && (format->duration == AV_NOPTS_VALUE || format->duration <= 0))) live = 1;
    const AVCodec *codec = NULL;
    int stream = av_find_best_stream(format, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (stream == AVERROR_STREAM_NOT_FOUND) {
        say(error, error_size, "no video stream in it (%s)", format->iformat->name);
        goto fail;
    }
    if (stream < 0 || !codec) {
        AVCodecParameters *parameters = stream >= 0 ? format->streams[stream]->codecpar : NULL;
        for (unsigned i = 0; !parameters && i < format->nb_streams; i++)
            if (format->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_VIDEO) parameters = format->streams[i]->codecpar;
        say(error, error_size, "its video codec (%s) cannot be decoded by this machine's FFmpeg",
            parameters ? avcodec_get_name(parameters->codec_id) : "unknown");
        goto fail;
    }
    AVStream *video_stream = format->streams[stream];
    if (over_pixel_limit(pixel_limit, video_stream->codecpar->width, video_stream->codecpar->height, 1, error,
                         error_size))
        goto fail;
    decoder = avcodec_alloc_context3(codec);
    if (!decoder || avcodec_parameters_to_context(decoder, video_stream->codecpar) < 0) {
        say(error, error_size, "out of memory");
        goto fail;
    }
    decoder->thread_count = threads;
    decoder->pkt_timebase = video_stream->time_base;
    // The decoder refuses a picture over the limit before it allocates one, for every frame: a stream may
    // change its size mid-way.
    if (pixel_limit > 0) decoder->max_pixels = pixel_limit;
    status = avcodec_open2(decoder, codec, NULL);
    if (status == 0 && over_pixel_limit(pixel_limit, decoder->width, decoder->height, 1, error, error_size)) goto fail;
    if (status < 0 || decoder->width <= 0 || decoder->height <= 0) {
        say(error, error_size, "cannot start the %s decoder: %s", codec->name,
            status < 0 ? reason(status, why, sizeof why) : "no frame size");
        goto fail;
    }
    lookout_video *video = calloc(1, sizeof *video);
    if (!video) {
        say(error, error_size, "out of memory");
        goto fail;
    }
    video->pixel_limit = pixel_limit;
    video->network = network;
    video->clock = clock;
    video->timeout = timeout;
    video->format = format;
    video->decoder = decoder;
    video->stream = stream;
    video->packet = av_packet_alloc();
    video->frame = av_frame_alloc();
    video->width = decoder->width;
    video->height = decoder->height;
    video->time_base = video_stream->time_base;
    video->start = video_stream->start_time != AV_NOPTS_VALUE ? video_stream->start_time : 0;
    video->live = live;
    AVRational rate = video_stream->avg_frame_rate.num > 0 ? video_stream->avg_frame_rate : video_stream->r_frame_rate;
    video->frame_rate = rate.num > 0 && rate.den > 0 ? av_q2d(rate) : 0;
    if (video_stream->duration != AV_NOPTS_VALUE && video_stream->duration > 0)
        video->stated_end = video_stream->duration * av_q2d(video->time_base);
    else if (format->duration != AV_NOPTS_VALUE && format->duration > 0)
        video->stated_end = (double)format->duration / AV_TIME_BASE;
    video->stated_frames = video_stream->nb_frames > 0 ? video_stream->nb_frames : 0;

    info->width = video->width;
    info->height = video->height;
    const uint8_t *matrix = av_stream_get_side_data(video_stream, AV_PKT_DATA_DISPLAYMATRIX, NULL);
    if (matrix) {
        // av_display_rotation_get gives the counter-clockwise angle; turning the frame clockwise by its
        // negation shows it upright (what ffmpeg's autorotate does).
        double clockwise = -av_display_rotation_get((const int32_t *)matrix);
        if (!isnan(clockwise)) {
            int quarter = (int)lround(clockwise / 90.0);
            info->rotation = ((quarter % 4) + 4) % 4 * 90;
        }
    }
    info->duration = live ? 0 : video->stated_end;
    info->frame_rate = video->frame_rate;
    info->frame_count = video->stated_frames;
    info->is_live = live;
    snprintf(info->codec, sizeof info->codec, "%s", codec->name);
    snprintf(info->container, sizeof info->container, "%s", format->iformat->name);
    return video;

fail:
    avcodec_free_context(&decoder);
    avformat_close_input(&format);
    free(clock);
    return NULL;
}

/// The frame's time in seconds from the stream's start (its presentation time, else counted frames).
static double frame_time(lookout_video *video) {
    int64_t stamp = video->frame->best_effort_timestamp;
    if (stamp == AV_NOPTS_VALUE) stamp = video->frame->pts;
    if (stamp == AV_NOPTS_VALUE)
        return video->frame_rate > 0 ? video->decoded / video->frame_rate : (double)video->decoded;
    return (stamp - video->start) * av_q2d(video->time_base);
}

static int convert(lookout_video *video, uint8_t *bgr, char *error, size_t error_size) {
    AVFrame *frame = video->frame;
    video->scaler = sws_getCachedContext(video->scaler, frame->width, frame->height, frame->format, video->width,
                                         video->height, AV_PIX_FMT_BGR24, SWS_BICUBIC, NULL, NULL, NULL);
    if (!video->scaler) {
        say(error, error_size, "cannot convert frames of pixel format %s", av_get_pix_fmt_name(frame->format));
        return -1;
    }
    // The frame's own colour matrix and range, as ffmpeg's scale filter takes them.
    int *inverse, *table, source_full, destination_full, brightness, contrast, saturation;
    if (sws_getColorspaceDetails(video->scaler, &inverse, &source_full, &table, &destination_full, &brightness,
                                 &contrast, &saturation) >= 0) {
        int colorspace = frame->colorspace == AVCOL_SPC_UNSPECIFIED ? SWS_CS_DEFAULT : (int)frame->colorspace;
        const int *coefficients = sws_getCoefficients(colorspace);
        int full = frame->color_range == AVCOL_RANGE_JPEG;
        if (frame->format == AV_PIX_FMT_YUVJ420P || frame->format == AV_PIX_FMT_YUVJ422P ||
            frame->format == AV_PIX_FMT_YUVJ444P)
            full = 1;
        sws_setColorspaceDetails(video->scaler, coefficients, full, table, destination_full, brightness, contrast,
                                 saturation);
    }
    if (!video->converted) {
        video->stride = (video->width * 3 + 63) & ~63;
        video->converted = av_malloc((size_t)video->stride * (video->height + 1) + 256);
        if (!video->converted) {
            say(error, error_size, "out of memory");
            return -1;
        }
    }
    uint8_t *planes[4] = {video->converted, NULL, NULL, NULL};
    int strides[4] = {video->stride, 0, 0, 0};
    int rows = sws_scale(video->scaler, (const uint8_t *const *)frame->data, frame->linesize, 0, frame->height, planes,
                         strides);
    if (rows <= 0) {
        say(error, error_size, "cannot convert a frame");
        return -1;
    }
    for (int y = 0; y < video->height; y++)
        memcpy(bgr + (size_t)y * video->width * 3, video->converted + (size_t)y * video->stride, (size_t)video->width * 3);
    return 0;
}

/// Whether the decoder has met a picture over the pixel limit (it refused it: `max_pixels`); then a sentence.
static int over_limit(lookout_video *video, char *error, size_t error_size) {
    return over_pixel_limit(video->pixel_limit, video->decoder->width, video->decoder->height, 0, error, error_size);
}

int lookout_video_next(lookout_video *video, uint8_t *bgr, double *time, char *error, size_t error_size) {
    char why[128];
    if (video->finished) return 0;
    for (;;) {
        int status = avcodec_receive_frame(video->decoder, video->frame);
        if (status == 0 &&
            over_pixel_limit(video->pixel_limit, video->frame->width, video->frame->height, 0, error, error_size)) {
            av_frame_unref(video->frame);
            return -1;
        }
        if (status == 0) {
            double seconds = frame_time(video);
            int failed = convert(video, bgr, error, error_size);
            av_frame_unref(video->frame);
            if (failed) return -1;
            video->decoded++;
            video->last_time = seconds;
            *time = seconds;
            return 1;
        }
        if (status == AVERROR_EOF) {
            video->finished = 1;
            // Fewer frames, or an earlier end, than the container states: the file was cut short.
            if (!video->sought && !video->live) {
                double interval = video->frame_rate > 0 ? 1.0 / video->frame_rate : 0.04;
                int short_count = video->stated_frames > 0 && video->decoded < video->stated_frames;
                int short_time = video->stated_end > 0 && video->decoded > 0 &&
                                 video->last_time + interval < video->stated_end - 2 * interval - 0.1;
                if (video->decoded == 0) {
                    say(error, error_size, "no frame could be decoded (truncated or damaged)");
                    return -1;
                }
                if (short_count || short_time) {
                    say(error, error_size,
                        "truncated: it ends after %lld frames (%.2f s), but its container states %s%.2f s", video->decoded,
                        video->last_time + interval, short_count ? "more frames and " : "", video->stated_end);
                    return -1;
                }
            }
            return 0;
        }
        if (status != AVERROR(EAGAIN)) {
            if (over_limit(video, error, error_size)) return -1;
            say(error, error_size, "cannot decode a frame: %s", reason(status, why, sizeof why));
            return -1;
        }
        if (video->flushing) {
            video->finished = 1;
            return 0;
        }
        // The decoder wants input: the packet it refused before, the next packet of the video stream, or
        // the flush at the end.
        for (;;) {
            if (!video->pending) {
                video->clock->deadline = monotonic() + video->timeout;
                status = av_read_frame(video->format, video->packet);
                if (status == AVERROR(EAGAIN)) continue;
                if (status < 0) {
                    if (status == AVERROR_EXIT || monotonic() > video->clock->deadline) {
                        say(error, error_size,
                            video->network ? "no data for %g s (the stream stopped answering)"
                                           : "a read took over %g s (the container keeps the demuxer busy)",
                            video->timeout);
                        return -1;
                    }
                    if (status != AVERROR_EOF && !(video->format->pb && avio_feof(video->format->pb))) {
                        say(error, error_size, "cannot read: %s", reason(status, why, sizeof why));
                        return -1;
                    }
                    video->flushing = 1;
                    avcodec_send_packet(video->decoder, NULL);
                    break;
                }
                if (video->packet->stream_index != video->stream) {
                    av_packet_unref(video->packet);
                    continue;
                }
            }
            status = avcodec_send_packet(video->decoder, video->packet);
            video->pending = status == AVERROR(EAGAIN);
            if (video->pending) break;
            av_packet_unref(video->packet);
            if (status < 0 && over_limit(video, error, error_size)) return -1;
            // Damaged packets are skipped as ffmpeg does (the decoder conceals what it can).
            if (status < 0 && status != AVERROR_INVALIDDATA) {
                say(error, error_size, "cannot decode: %s", reason(status, why, sizeof why));
                return -1;
            }
            break;
        }
    }
}

int lookout_video_seek(lookout_video *video, double seconds, char *error, size_t error_size) {
    char why[128];
    int64_t target = video->start + (int64_t)llround(seconds / av_q2d(video->time_base));
    int status = av_seek_frame(video->format, video->stream, target, AVSEEK_FLAG_BACKWARD);
    if (status < 0) {
        say(error, error_size, "cannot seek to %.3f s: %s", seconds, reason(status, why, sizeof why));
        return -1;
    }
    avcodec_flush_buffers(video->decoder);
    if (video->pending) av_packet_unref(video->packet);
    video->pending = 0;
    video->flushing = 0;
    video->finished = 0;
    video->sought = 1;
    return 0;
}

void lookout_video_close(lookout_video *video) {
    if (!video) return;
    sws_freeContext(video->scaler);
    av_free(video->converted);
    av_frame_free(&video->frame);
    av_packet_free(&video->packet);
    avcodec_free_context(&video->decoder);
    avformat_close_input(&video->format);
    free(video->clock);
    free(video);
}

struct lookout_video_writer {
    AVFormatContext *format;
    AVCodecContext *encoder;
    AVStream *stream;
    struct SwsContext *scaler;
    AVFrame *frame;
    AVPacket *packet;
    uint8_t *padded;  // the BGR frame grown to even sides, rows of `stride` bytes with slack (swscale reads past ends)
    int width, height, even_width, even_height, stride;
    int64_t last_pts;
    int header_written;
};

static void writer_free(lookout_video_writer *writer) {
    if (!writer) return;
    if (writer->format && writer->format->pb) avio_closep(&writer->format->pb);
    avformat_free_context(writer->format);
    avcodec_free_context(&writer->encoder);
    sws_freeContext(writer->scaler);
    av_frame_free(&writer->frame);
    av_packet_free(&writer->packet);
    av_free(writer->padded);
    free(writer);
}

void lookout_video_writer_abandon(lookout_video_writer *writer) { writer_free(writer); }

lookout_video_writer *lookout_video_writer_open(const char *path, int width, int height, double frame_rate, int crf,
                                                char *error, size_t error_size) {
    pthread_once(&setup_once, setup);
    char why[128];
    lookout_video_writer *writer = calloc(1, sizeof *writer);
    writer->width = width;
    writer->height = height;
    writer->even_width = (width + 1) & ~1;
    writer->even_height = (height + 1) & ~1;
    writer->last_pts = AV_NOPTS_VALUE;
    int status = avformat_alloc_output_context2(&writer->format, NULL, "mp4", path);
    const AVCodec *codec = avcodec_find_encoder_by_name("libx264");
    if (!codec) codec = avcodec_find_encoder(AV_CODEC_ID_H264);
    if (status < 0 || !codec) {
        say(error, error_size, status < 0 ? "cannot make an MP4 file" : "this FFmpeg has no H.264 encoder");
        writer_free(writer);
        return NULL;
    }
    writer->encoder = avcodec_alloc_context3(codec);
    AVCodecContext *encoder = writer->encoder;
    encoder->width = writer->even_width;
    encoder->height = writer->even_height;
    encoder->pix_fmt = AV_PIX_FMT_YUV420P;
    encoder->time_base = (AVRational){1, 90000};
    AVRational rate = av_d2q(frame_rate > 0 ? frame_rate : 25, 100000);
    encoder->framerate = rate;
    encoder->gop_size = 250;
    encoder->thread_count = 1;
    // swscale's RGB to YUV uses BT.601 limited range: say so, so that players convert back the same way.
    encoder->colorspace = AVCOL_SPC_SMPTE170M;
    encoder->color_range = AVCOL_RANGE_MPEG;
    if (writer->format->oformat->flags & AVFMT_GLOBALHEADER) encoder->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    char crf_text[16];
    snprintf(crf_text, sizeof crf_text, "%d", crf);
    av_opt_set(encoder->priv_data, "crf", crf_text, 0);
    av_opt_set(encoder->priv_data, "preset", "veryfast", 0);
    status = avcodec_open2(encoder, codec, NULL);
    if (status < 0) {
        say(error, error_size, "cannot start the %s encoder: %s", codec->name, reason(status, why, sizeof why));
        writer_free(writer);
        return NULL;
    }
    writer->stream = avformat_new_stream(writer->format, NULL);
    writer->stream->time_base = encoder->time_base;
    avcodec_parameters_from_context(writer->stream->codecpar, encoder);
    status = avio_open(&writer->format->pb, path, AVIO_FLAG_WRITE);
    if (status < 0) {
        say(error, error_size, "cannot create the file: %s", reason(status, why, sizeof why));
        writer_free(writer);
        return NULL;
    }
    AVDictionary *options = NULL;
    av_dict_set(&options, "movflags", "+faststart", 0);
    status = avformat_write_header(writer->format, &options);
    av_dict_free(&options);
    if (status < 0) {
        say(error, error_size, "cannot write the MP4 header: %s", reason(status, why, sizeof why));
        writer_free(writer);
        return NULL;
    }
    writer->header_written = 1;
    writer->frame = av_frame_alloc();
    writer->frame->format = AV_PIX_FMT_YUV420P;
    writer->frame->width = writer->even_width;
    writer->frame->height = writer->even_height;
    writer->packet = av_packet_alloc();
    writer->stride = (writer->even_width * 3 + 63) & ~63;
    writer->padded = av_mallocz((size_t)writer->stride * (writer->even_height + 1) + 256);
    writer->scaler = sws_getContext(writer->even_width, writer->even_height, AV_PIX_FMT_BGR24, writer->even_width,
                                    writer->even_height, AV_PIX_FMT_YUV420P, SWS_BICUBIC, NULL, NULL, NULL);
    if (av_frame_get_buffer(writer->frame, 0) < 0 || !writer->padded || !writer->scaler) {
        say(error, error_size, "out of memory");
        writer_free(writer);
        return NULL;
    }
    return writer;
}

/// Sends `frame` (NULL flushes) and writes every packet the encoder has ready.
static int drain(lookout_video_writer *writer, AVFrame *frame, char *error, size_t error_size) {
    char why[128];
    int status = avcodec_send_frame(writer->encoder, frame);
    if (status < 0) {
        say(error, error_size, "cannot encode: %s", reason(status, why, sizeof why));
        return -1;
    }
    for (;;) {
        status = avcodec_receive_packet(writer->encoder, writer->packet);
        if (status == AVERROR(EAGAIN) || status == AVERROR_EOF) return 0;
        if (status < 0) {
            say(error, error_size, "cannot encode: %s", reason(status, why, sizeof why));
            return -1;
        }
        // Without a duration the last frame would fall outside the MP4's edit list (and never be shown).
        if (writer->packet->duration <= 0)
            writer->packet->duration =
                av_rescale_q(1, av_inv_q(writer->encoder->framerate), writer->encoder->time_base);
        av_packet_rescale_ts(writer->packet, writer->encoder->time_base, writer->stream->time_base);
        writer->packet->stream_index = writer->stream->index;
        status = av_interleaved_write_frame(writer->format, writer->packet);
        if (status < 0) {
            say(error, error_size, "cannot write: %s", reason(status, why, sizeof why));
            return -1;
        }
    }
}

int lookout_video_writer_add(lookout_video_writer *writer, const uint8_t *bgr, double time, char *error,
                             size_t error_size) {
    int64_t pts = llround(time * 90000);
    if (writer->last_pts != AV_NOPTS_VALUE && pts <= writer->last_pts) pts = writer->last_pts + 1;
    writer->last_pts = pts;
    size_t row = (size_t)writer->width * 3;
    for (int y = 0; y < writer->even_height; y++) {
        const uint8_t *from = bgr + (size_t)(y < writer->height ? y : writer->height - 1) * row;
        uint8_t *to = writer->padded + (size_t)y * writer->stride;
        memcpy(to, from, row);
        if (writer->even_width > writer->width) memcpy(to + row, from + row - 3, 3);
    }
    const uint8_t *source = writer->padded;
    if (av_frame_make_writable(writer->frame) < 0) {
        say(error, error_size, "out of memory");
        return -1;
    }
    const uint8_t *planes[4] = {source, NULL, NULL, NULL};
    int strides[4] = {writer->stride, 0, 0, 0};
    sws_scale(writer->scaler, planes, strides, 0, writer->even_height, writer->frame->data, writer->frame->linesize);
    writer->frame->pts = pts;
    return drain(writer, writer->frame, error, error_size);
}

int lookout_video_writer_finish(lookout_video_writer *writer, char *error, size_t error_size) {
    char why[128];
    int result = drain(writer, NULL, error, error_size);
    if (result == 0) {
        int status = av_write_trailer(writer->format);
        if (status < 0) {
            say(error, error_size, "cannot finish the MP4 file: %s", reason(status, why, sizeof why));
            result = -1;
        }
    }
    writer_free(writer);
    return result;
}

#endif
