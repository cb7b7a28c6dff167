#ifndef LOOKOUT_CJSONC_SHIM_H
#define LOOKOUT_CJSONC_SHIM_H
#include <json.h>
#endif
