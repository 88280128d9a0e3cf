/* ctorch: PyTorch's core in C11. The one header a user includes. */
#ifndef CTORCH_H
#define CTORCH_H

#include "ctorch/core.h"
#include "ctorch/memory.h"
#include "ctorch/cuda.h"
#include "ctorch/io.h"
#include "ctorch/dispatch.h"
#include "ctorch/ops.h"
#include "ctorch/optim.h"
#include "ctorch/data.h"
#include "ctorch/autograd.h"
#include "ctorch/amp.h"
#include "ctorch/nn.h"
#include "ctorch/profiler.h"
#include "ctorch/compile.h"
#include "ctorch/distributed.h"

#endif /* CTORCH_H */
