package cublas

import (
	"fmt"

	"github.com/gotrain/gotrain/cuda"
)

// Op says whether a GEMM operand is used as stored or transposed
// (cublasOperation_t).
type Op int

// cublasOperation_t values.
const (
	NoTrans Op = 0 // CUBLAS_OP_N
	Trans   Op = 1 // CUBLAS_OP_T
)

func (o Op) String() string {
	switch o {
	case NoTrans:
		return "N"
	case Trans:
		return "T"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// DataType is an element type of a matrix (cudaDataType_t).
type DataType int

// cudaDataType_t values (library_types.h) the GEMMs accept.
const (
	R32F  DataType = 0  // CUDA_R_32F, float
	R16BF DataType = 14 // CUDA_R_16BF, bfloat16
)

// Size is the element size in bytes (0 for an unknown type).
func (t DataType) Size() int {
	switch t {
	case R32F:
		return 4
	case R16BF:
		return 2
	}
	return 0
}

func (t DataType) String() string {
	switch t {
	case R32F:
		return "CUDA_R_32F"
	case R16BF:
		return "CUDA_R_16BF"
	}
	return fmt.Sprintf("cudaDataType(%d)", int(t))
}

// ComputeType is the precision products accumulate in
// (cublasComputeType_t). All of those declared here scale with float32
// alpha and beta.
type ComputeType int

// cublasComputeType_t values with fp32 scaling.
const (
	Compute32F         ComputeType = 68 // CUBLAS_COMPUTE_32F: fp32 accumulation
	Compute32FPedantic ComputeType = 69 // CUBLAS_COMPUTE_32F_PEDANTIC
	Compute32FFast16BF ComputeType = 75 // CUBLAS_COMPUTE_32F_FAST_16BF: fp32 inputs rounded to bf16
	Compute32FFastTF32 ComputeType = 77 // CUBLAS_COMPUTE_32F_FAST_TF32: fp32 on tensor cores
)

func (c ComputeType) String() string {
	switch c {
	case Compute32F:
		return "CUBLAS_COMPUTE_32F"
	case Compute32FPedantic:
		return "CUBLAS_COMPUTE_32F_PEDANTIC"
	case Compute32FFast16BF:
		return "CUBLAS_COMPUTE_32F_FAST_16BF"
	case Compute32FFastTF32:
		return "CUBLAS_COMPUTE_32F_FAST_TF32"
	}
	return fmt.Sprintf("cublasComputeType(%d)", int(c))
}

// MathMode is a handle's cublasMath_t: a mode, optionally OR-ed with
// MathDisallowReducedPrecisionReduction.
type MathMode int

// cublasMath_t values.
const (
	DefaultMath                           MathMode = 0
	PedanticMath                          MathMode = 2
	TF32TensorOpMath                      MathMode = 3
	MathDisallowReducedPrecisionReduction MathMode = 16
)

// gemmAlgoDefault is CUBLAS_GEMM_DEFAULT: let cuBLAS choose.
const gemmAlgoDefault = -1

// Matrix is a GEMM operand in device memory, column-major: element (i, j)
// is at Ptr + (i + j*LD)*Type.Size() bytes. LD is in elements and at least
// the number of rows of the matrix as stored.
type Matrix struct {
	Ptr  cuda.DevicePtr
	Type DataType
	LD   int
}

// Version is a library's major.minor.patch.
type Version struct{ Major, Minor, Patch int }

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }
