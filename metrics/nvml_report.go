package metrics

// NVMLReport is what NVML says about the machine's GPUs.
type NVMLReport struct {
	DriverVersion string `json:"driver_version"` // e.g. "550.54.15"
	NVMLVersion   string `json:"nvml_version"`
	// CUDADriverVersion is the newest CUDA the driver supports, as
	// 1000*major + 10*minor (12040 for 12.4); 0 if NVML did not say.
	CUDADriverVersion int       `json:"cuda_driver_version"`
	GPUs              []GPUInfo `json:"gpus"`
}

// GPUInfo is one GPU as NVML sees it. NVML numbers GPUs in PCI order,
// ignoring CUDA_VISIBLE_DEVICES: match them to CUDA devices by PCIBusID.
type GPUInfo struct {
	Index            int    `json:"index"`
	Name             string `json:"name"`
	UUID             string `json:"uuid"`
	PCIBusID         string `json:"pci_bus_id,omitempty"`
	CCMajor          int    `json:"cc_major"` // compute capability
	CCMinor          int    `json:"cc_minor"`
	MemoryTotalBytes uint64 `json:"memory_total_bytes"`
	MemoryUsedBytes  uint64 `json:"memory_used_bytes"`
	// Utilization is the fraction of the last sample period in which a
	// kernel ran (0..1), or -1 when the GPU does not report it.
	Utilization float64 `json:"utilization"`
	// Err lists what NVML failed to report for this GPU; the other fields
	// are still valid.
	Err string `json:"error,omitempty"`
}
