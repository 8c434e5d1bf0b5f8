// `layerjit devices`: lists the CUDA devices the driver sees, with what layerjit needs to know about
// each (see runtime/device_info.h), and the NVRTC target layerjit would compile for.
#pragma once

/// Prints every device on stdout and returns 0; without a CUDA driver (or device) prints one clear
/// message on stderr and returns 1.
int cmd_devices(int argc, char** argv);
