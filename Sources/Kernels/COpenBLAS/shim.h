#ifndef LOOKOUT_COPENBLAS_SHIM_H
#define LOOKOUT_COPENBLAS_SHIM_H
#include <cblas.h>
/* Declared by OpenBLAS' cblas.h; repeated here so the shim documents what Lookout uses. */
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
#endif
