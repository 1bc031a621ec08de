/* What the parts of the simulated NVML share. */
#ifndef VRAM_NVML_SIM_H
#define VRAM_NVML_SIM_H

#include <stdbool.h>

/* Whether nvmlInit has succeeded more often than nvmlShutdown was called. */
bool nvml_sim_ready(void);

#endif
