/* <backend>-linear (vk-linear, cl-linear, cuda-linear and the emulated
 * cuda-emulated-sm*-linear): W8A8-INT8, QQQ W4A8 and W8A8-FP8 layers on
 * one plugin, picked by the first argument (backends.h). Each backend's
 * entry lists its shape matrix and paths (vk_linear.c, cl_linear.c,
 * cuda_linear.c); QPORT_TEST_ONLY=int8,qqq,fp8 picks the groups. */
#include "backends.h"

int main(int argc, char **argv) { return bh_backend_main(argc, argv, "linear", NULL); }
