/* The s model's convolutions at 640x640 (the shapes and counts of `lookout-benchmarks layers`) and the timing
   helpers shared by onednn_layers.c and xnnpack_layers.c. */
#ifndef LOOKOUT_BENCH_LAYERS_H
#define LOOKOUT_BENCH_LAYERS_H
#include <stdlib.h>
#include <time.h>

static const int shapes[][7] = {
    /* inputs, outputs, kernel, stride, height, width, times per detection */
    {3, 32, 3, 2, 640, 640, 1},    {32, 64, 3, 2, 320, 320, 1},  {64, 128, 3, 2, 160, 160, 1},
    {128, 256, 3, 2, 80, 80, 1},   {256, 512, 3, 2, 40, 40, 1},  {128, 128, 3, 2, 80, 80, 1},
    {256, 256, 3, 2, 40, 40, 1},   {32, 32, 3, 1, 160, 160, 2},  {64, 64, 3, 1, 80, 80, 8},
    {128, 128, 3, 1, 80, 80, 2},   {128, 128, 3, 1, 40, 40, 11}, {256, 256, 3, 1, 20, 20, 5},
    {128, 64, 3, 1, 80, 80, 1},    {256, 128, 3, 1, 40, 40, 1},  {256, 64, 3, 1, 40, 40, 1},
    {512, 128, 3, 1, 20, 20, 1},   {512, 64, 3, 1, 20, 20, 1},   {64, 64, 3, 1, 40, 40, 1},
    {64, 64, 3, 1, 20, 20, 1},     {128, 128, 3, 1, 20, 20, 1},  {64, 64, 1, 1, 160, 160, 1},
    {96, 64, 1, 1, 160, 160, 1},   {128, 128, 1, 1, 80, 80, 1},  {256, 128, 1, 1, 80, 80, 2},
    {384, 128, 1, 1, 80, 80, 1},   {64, 64, 1, 1, 80, 80, 1},    {256, 256, 1, 1, 40, 40, 1},
    {384, 256, 1, 1, 40, 40, 1},   {512, 256, 1, 1, 40, 40, 3},  {768, 256, 1, 1, 40, 40, 1},
    {64, 64, 1, 1, 40, 40, 1},     {512, 256, 1, 1, 20, 20, 1},  {512, 512, 1, 1, 20, 20, 1},
    {768, 512, 1, 1, 20, 20, 2},   {1024, 512, 1, 1, 20, 20, 2}, {64, 64, 1, 1, 20, 20, 1},
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of `runs` samples (sorted in place). */
static double median(double *samples, int runs) {
    qsort(samples, runs, sizeof(double), compare);
    return samples[runs / 2];
}
#endif
