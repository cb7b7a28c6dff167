#ifndef LOOKOUT_VIDEO_H
#define LOOKOUT_VIDEO_H
#include <stddef.h>
#include <stdint.h>

/// Reading and writing videos through Debian's FFmpeg libraries (libavformat, libavcodec, libswscale,
/// libavdevice for cameras). Frames cross this interface as BGR, 8 bits per channel, rows top to bottom:
/// the layout of Lookout's images.

/// What a video's container states, before any frame is decoded.
typedef struct {
    int width;              /// frame size as coded (before rotation)
    int height;
    int rotation;           /// clockwise degrees that make the frame upright: 0, 90, 180 or 270
    double duration;        /// seconds; 0 when the container does not say
    double frame_rate;      /// frames per second (average, else the stream's rate); 0 when unknown
    long long frame_count;  /// frames the container states; 0 when it does not say
    int is_live;            /// a camera or a live network stream (no stated end)
    char codec[32];         /// the decoder's name, e.g. "h264"
    char container[64];     /// the demuxer's name, e.g. "matroska,webm"
} lookout_video_info;

typedef struct lookout_video lookout_video;

/// Opens `path` (a file, a V4L2 device such as /dev/video0, or a URL: rtsp, rtsps, http(s) for HLS or
/// progressive MP4, udp, rtp, rtmp, srt) and its best video stream with a decoder that uses `threads` threads (0:
/// FFmpeg's choice). The open and each read give up after `timeout` seconds (0: 10 s): a URL's without an
/// answer, a file's still busy. A file is read through the file protocol alone, by the demuxers of ordinary
/// containers (MP4/MOV, Matroska/WebM, AVI, MPEG-TS/PS, FLV, Ogg, ASF): no manifest, playlist or
/// concatenation that names other files. A URL uses its scheme's protocols, never `file`. Frames over
/// `pixel_limit` pixels (0: no limit) are refused at the open and, for every frame, before the decoder allocates
/// them. Returns NULL with a sentence in `error` when the source cannot be opened, is not a video, has no video
/// stream, its frames are over the limit ("frames of W×H are over …"), or its codec cannot be decoded here.
lookout_video *lookout_video_open(const char *path, int threads, double timeout, long long pixel_limit,
                                  lookout_video_info *info, char *error, size_t error_size);

/// Decodes the next frame into `bgr` (width*height*3 bytes, the info's coded size: a frame of another size
/// is scaled to it). `time` receives its presentation time in seconds from the stream's start. Returns 1
/// for a frame, 0 at the end of the video, -1 with a sentence in `error` (a read or decode error, or a
/// file that ends before the frames or the duration its container states: truncated).
int lookout_video_next(lookout_video *video, uint8_t *bgr, double *time, char *error, size_t error_size);

/// Moves to the last key frame at or before `seconds`; the following lookout_video_next calls decode from
/// there (frames before `seconds` included). Returns 0, or -1 with a sentence in `error`.
int lookout_video_seek(lookout_video *video, double seconds, char *error, size_t error_size);

void lookout_video_close(lookout_video *video);

typedef struct lookout_video_writer lookout_video_writer;

/// Creates an H.264 video in an MP4 file (libx264, yuv420p, constant quality `crf`) for BGR frames of
/// width×height (an odd side is padded by one repeated row or column). Returns NULL with a sentence in
/// `error` when the file cannot be created or the encoder is missing.
lookout_video_writer *lookout_video_writer_open(const char *path, int width, int height, double frame_rate, int crf,
                                                char *error, size_t error_size);

/// Encodes one frame shown at `time` seconds (times must increase). Returns 0, or -1 with `error`.
int lookout_video_writer_add(lookout_video_writer *writer, const uint8_t *bgr, double time, char *error,
                             size_t error_size);

/// Flushes the encoder, writes the file's index and closes it (and frees the writer, also on failure).
/// Returns 0, or -1 with `error`.
int lookout_video_writer_finish(lookout_video_writer *writer, char *error, size_t error_size);

/// Frees a writer without finishing its file (after an error).
void lookout_video_writer_abandon(lookout_video_writer *writer);
#endif
