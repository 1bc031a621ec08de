/* The subset of NVML's ABI vram uses, declared by us (names, values and
 * layouts of nvml.h), shared by the simulated NVML and the interposer. */
#ifndef VRAM_NVML_ABI_H
#define VRAM_NVML_ABI_H

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_INSUFFICIENT_POWER = 8,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_UNKNOWN = 999,
};

typedef struct nvmlDevice_st *nvmlDevice_t;

typedef struct nvmlMemory_st {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct nvmlMemory_v2_st {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

typedef struct nvmlProcessInfo_v1_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct nvmlProcessInfo_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

/* PCI: the original layout (nvmlDeviceGetPciInfo, _v2) holds a 16-byte bus
 * id and reserved words; _v3's has a legacy and a 32-byte bus id. The
 * first 36 bytes are the same in both. */
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
typedef struct nvmlPciInfo_st {
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;
typedef struct nvmlPciInfo_v1_st {
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    unsigned int reserved0, reserved1, reserved2, reserved3;
} nvmlPciInfo_v1_t;

typedef struct nvmlBAR1Memory_st {
    unsigned long long bar1Total, bar1Free, bar1Used;
} nvmlBAR1Memory_t;
typedef struct nvmlUtilization_st {
    unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct nvmlProcessUtilizationSample_st {
    unsigned int pid;
    unsigned long long timeStamp; /* microseconds */
    unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;
/* The versioned structs' version word: the struct's size, its version in
 * the top byte (what nvml.h's NVML_STRUCT_VERSION makes). */
#define NVML_VERSION_OF(layout, ver) ((unsigned int)(sizeof(layout) | ((ver) << 24u)))
/* nvmlDeviceGetProcessesUtilizationInfo's: the caller's array and its size. */
typedef struct {
    unsigned long long timeStamp; /* microseconds */
    unsigned int pid;
    unsigned int smUtil, memUtil, encUtil, decUtil, jpgUtil, ofaUtil;
} nvmlProcessUtilizationInfo_v1_t;
typedef struct {
    unsigned int version;
    unsigned int processSamplesCount; /* in: the array's size; out: how many */
    unsigned long long lastSeenTimeStamp;
    nvmlProcessUtilizationInfo_v1_t *procUtilArray;
} nvmlProcessesUtilizationInfo_v1_t;
typedef nvmlProcessesUtilizationInfo_v1_t nvmlProcessesUtilizationInfo_t;
#define nvmlProcessesUtilizationInfo_v1 NVML_VERSION_OF(nvmlProcessesUtilizationInfo_v1_t, 1)
/* A process's accounting (nvmlDeviceGetAccountingStats), when the
 * device's accounting mode is on. */
typedef struct nvmlAccountingStats_st {
    unsigned int gpuUtilization, memoryUtilization; /* percent over its life */
    unsigned long long maxMemoryUsage;               /* bytes */
    unsigned long long time;                         /* ms; 0 while it runs */
    unsigned long long startTime;                    /* microseconds */
    unsigned int isRunning;
    unsigned int reserved[5];
} nvmlAccountingStats_t;
typedef int nvmlTemperatureSensors_t;
enum { NVML_TEMPERATURE_GPU = 0 };
/* nvmlDeviceGetTemperatureV's: the sensor in, its reading out. */
typedef struct {
    unsigned int version;
    nvmlTemperatureSensors_t sensorType;
    int temperature;
} nvmlTemperature_v1_t;
typedef nvmlTemperature_v1_t nvmlTemperature_t;
#define nvmlTemperature_v1 NVML_VERSION_OF(nvmlTemperature_v1_t, 1)
typedef int nvmlTemperatureThresholds_t;
enum {
    NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0,
    NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1,
    NVML_TEMPERATURE_THRESHOLD_MEM_MAX = 2,
    NVML_TEMPERATURE_THRESHOLD_GPU_MAX = 3,
};
typedef int nvmlClockType_t;
enum { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_CLOCK_VIDEO = 3 };
typedef int nvmlEnableState_t;
typedef int nvmlComputeMode_t;
typedef int nvmlPstates_t;

typedef nvmlReturn_t (*PFN_nvmlInit_v2)(void);
typedef nvmlReturn_t (*PFN_nvmlShutdown)(void);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetCount_v2)(unsigned int *count);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetHandleByIndex_v2)(unsigned int index, nvmlDevice_t *device);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetHandleByUUID)(const char *uuid, nvmlDevice_t *device);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetUUID)(nvmlDevice_t device, char *uuid, unsigned int length);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetName)(nvmlDevice_t device, char *name, unsigned int length);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetMemoryInfo)(nvmlDevice_t device, nvmlMemory_t *memory);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetMemoryInfo_v2)(nvmlDevice_t device, nvmlMemory_v2_t *memory);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetComputeRunningProcesses)(nvmlDevice_t device,
                                                                 unsigned int *infoCount,
                                                                 nvmlProcessInfo_v1_t *infos);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetComputeRunningProcesses_v3)(nvmlDevice_t device,
                                                                    unsigned int *infoCount,
                                                                    nvmlProcessInfo_t *infos);
typedef const char *(*PFN_nvmlErrorString)(nvmlReturn_t result);
/* The original names (before the _v2 ABI) and what monitoring tools call. */
typedef nvmlReturn_t (*PFN_nvmlInit)(void);
typedef nvmlReturn_t (*PFN_nvmlInitWithFlags)(unsigned int flags);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetCount)(unsigned int *count);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetHandleByIndex)(unsigned int index, nvmlDevice_t *device);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetHandleByPciBusId)(const char *pciBusId, nvmlDevice_t *device);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetHandleByPciBusId_v2)(const char *pciBusId,
                                                             nvmlDevice_t *device);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetIndex)(nvmlDevice_t device, unsigned int *index);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetMinorNumber)(nvmlDevice_t device, unsigned int *minorNumber);
typedef nvmlReturn_t (*PFN_nvmlSystemGetDriverVersion)(char *version, unsigned int length);
typedef nvmlReturn_t (*PFN_nvmlSystemGetNVMLVersion)(char *version, unsigned int length);
typedef nvmlReturn_t (*PFN_nvmlSystemGetCudaDriverVersion)(int *cudaDriverVersion);
typedef nvmlReturn_t (*PFN_nvmlSystemGetCudaDriverVersion_v2)(int *cudaDriverVersion);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetPciInfo)(nvmlDevice_t device, nvmlPciInfo_t *pci);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetPciInfo_v2)(nvmlDevice_t device, nvmlPciInfo_t *pci);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetPciInfo_v3)(nvmlDevice_t device, nvmlPciInfo_t *pci);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetCurrPcieLinkGeneration)(nvmlDevice_t device,
                                                                unsigned int *currLinkGen);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetCurrPcieLinkWidth)(nvmlDevice_t device,
                                                           unsigned int *currLinkWidth);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetComputeRunningProcesses_v2)(nvmlDevice_t device,
                                                                    unsigned int *infoCount,
                                                                    nvmlProcessInfo_t *infos);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetGraphicsRunningProcesses)(nvmlDevice_t device,
                                                                  unsigned int *infoCount,
                                                                  nvmlProcessInfo_v1_t *infos);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetGraphicsRunningProcesses_v2)(nvmlDevice_t device,
                                                                     unsigned int *infoCount,
                                                                     nvmlProcessInfo_t *infos);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetGraphicsRunningProcesses_v3)(nvmlDevice_t device,
                                                                     unsigned int *infoCount,
                                                                     nvmlProcessInfo_t *infos);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetBAR1MemoryInfo)(nvmlDevice_t device, nvmlBAR1Memory_t *bar1);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetUtilizationRates)(nvmlDevice_t device,
                                                          nvmlUtilization_t *utilization);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetTemperature)(nvmlDevice_t device,
                                                     nvmlTemperatureSensors_t sensorType,
                                                     unsigned int *temp);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetTemperatureV)(nvmlDevice_t device,
                                                      nvmlTemperature_t *temperature);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetProcessUtilization)(
    nvmlDevice_t device, nvmlProcessUtilizationSample_t *utilization,
    unsigned int *processSamplesCount, unsigned long long lastSeenTimeStamp);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetProcessesUtilizationInfo)(
    nvmlDevice_t device, nvmlProcessesUtilizationInfo_t *procesesUtilInfo);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetAccountingPids)(nvmlDevice_t device, unsigned int *count,
                                                        unsigned int *pids);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetAccountingStats)(nvmlDevice_t device, unsigned int pid,
                                                         nvmlAccountingStats_t *stats);
typedef nvmlReturn_t (*PFN_nvmlDeviceIsMigDeviceHandle)(nvmlDevice_t device,
                                                        unsigned int *isMigDevice);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetTemperatureThreshold)(nvmlDevice_t device,
                                                              nvmlTemperatureThresholds_t type,
                                                              unsigned int *temp);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetFanSpeed)(nvmlDevice_t device, unsigned int *speed);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetClockInfo)(nvmlDevice_t device, nvmlClockType_t type,
                                                   unsigned int *clock);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetMaxClockInfo)(nvmlDevice_t device, nvmlClockType_t type,
                                                      unsigned int *clock);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetCurrentClocksThrottleReasons)(nvmlDevice_t device,
                                                                      unsigned long long *reasons);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetSupportedClocksThrottleReasons)(nvmlDevice_t device,
                                                                        unsigned long long *reasons);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetPowerUsage)(nvmlDevice_t device, unsigned int *power);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetEnforcedPowerLimit)(nvmlDevice_t device, unsigned int *limit);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetPowerManagementLimit)(nvmlDevice_t device, unsigned int *limit);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetComputeMode)(nvmlDevice_t device, nvmlComputeMode_t *mode);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetPerformanceState)(nvmlDevice_t device, nvmlPstates_t *pState);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetPersistenceMode)(nvmlDevice_t device, nvmlEnableState_t *mode);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetCudaComputeCapability)(nvmlDevice_t device, int *major,
                                                               int *minor);

#endif
