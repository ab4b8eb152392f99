package nccl

import "fmt"

// UniqueIDBytes is the size of an ncclUniqueId, unchanged since NCCL 2.3.
const UniqueIDBytes = 128

// UniqueID identifies one communicator while its ranks join it. Rank 0
// makes it (Library.UniqueID) and sends the bytes, as they are, to every
// other rank; it is opaque.
type UniqueID [UniqueIDBytes]byte

// DataType is an ncclDataType_t.
type DataType int

// ncclDataType_t values. Bfloat16 needs NCCL 2.10.3.
const (
	Int8     DataType = 0
	Uint8    DataType = 1
	Int32    DataType = 2
	Uint32   DataType = 3
	Int64    DataType = 4
	Uint64   DataType = 5
	Float16  DataType = 6
	Float32  DataType = 7
	Float64  DataType = 8
	Bfloat16 DataType = 9
)

// Size is the element size in bytes (0 for an unknown type).
func (d DataType) Size() int {
	switch d {
	case Int8, Uint8:
		return 1
	case Float16, Bfloat16:
		return 2
	case Int32, Uint32, Float32:
		return 4
	case Int64, Uint64, Float64:
		return 8
	}
	return 0
}

func (d DataType) String() string {
	names := [...]string{"int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64", "bfloat16"}
	if d >= 0 && int(d) < len(names) {
		return names[d]
	}
	return fmt.Sprintf("ncclDataType(%d)", int(d))
}

// RedOp is an ncclRedOp_t.
type RedOp int

// ncclRedOp_t values. Avg needs NCCL 2.10.3.
const (
	Sum  RedOp = 0
	Prod RedOp = 1
	Max  RedOp = 2
	Min  RedOp = 3
	Avg  RedOp = 4
)

func (o RedOp) String() string {
	names := [...]string{"sum", "prod", "max", "min", "avg"}
	if o >= 0 && int(o) < len(names) {
		return names[o]
	}
	return fmt.Sprintf("ncclRedOp(%d)", int(o))
}
