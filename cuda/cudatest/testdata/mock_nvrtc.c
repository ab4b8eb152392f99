/*
 * mock_nvrtc.c: a stand-in for libnvrtc, built with gcc by
 * cudatest.BuildMockNVRTC and loaded through GOTRAIN_LIBNVRTC, so that the
 * choice of compile target can be tested against the architecture lists
 * of NVRTC releases no machine here has. It exports the NVRTC calls
 * gotrain resolves, with NVRTC's prototypes and result codes, and checks
 * what a real NVRTC would refuse:
 *
 * - --gpu-architecture (or -arch) must name sm_XX or compute_XX for an XX
 *   the release supports, else NVRTC_ERROR_INVALID_OPTION with NVRTC's
 *   log line; any other argument that is not an option is refused too.
 * - "Compiling" finds every extern "C" __global__ function of the source
 *   and writes PTX with its ".version" (the release's PTX ISA: NVRTC X.Y
 *   writes X-4.Y), ".target sm_XX" and one ".entry" per kernel, which the
 *   mock driver loads and runs by name. An sm_XX target also gives a
 *   CUBIN: an ELF header with EM_CUDA and XX in e_flags, as real CUBINs
 *   carry it, followed by the PTX (the mock driver refuses CUBINs).
 * - A source containing the identifier undefined_name fails with
 *   NVRTC_ERROR_COMPILATION and a log naming its file and line.
 *
 * Build options:
 *   -DMOCK_NVRTC_MAJOR=N, -DMOCK_NVRTC_MINOR=N  nvrtcVersion (default 12.4)
 *   -DMOCK_NVRTC_ARCHS=a,b,...  nvrtcGetSupportedArchs, ascending (default
 *                               CUDA 12.4's: 50 52 53 60 61 62 70 72 75 80
 *                               86 87 89 90)
 *   -DMOCK_NVRTC_NO_PTX_FOR_SM  an sm_XX compilation keeps no PTX:
 *                               nvrtcGetPTXSize fails for it
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MOCK_NVRTC_MAJOR
#define MOCK_NVRTC_MAJOR 12
#endif
#ifndef MOCK_NVRTC_MINOR
#define MOCK_NVRTC_MINOR 4
#endif
#ifndef MOCK_NVRTC_ARCHS
#define MOCK_NVRTC_ARCHS 50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90
#endif

#define EXPORT __attribute__((visibility("default")))

typedef int nvrtcResult;
enum {
	NVRTC_SUCCESS = 0,
	NVRTC_ERROR_OUT_OF_MEMORY = 1,
	NVRTC_ERROR_PROGRAM_CREATION_FAILURE = 2,
	NVRTC_ERROR_INVALID_INPUT = 3,
	NVRTC_ERROR_INVALID_PROGRAM = 4,
	NVRTC_ERROR_INVALID_OPTION = 5,
	NVRTC_ERROR_COMPILATION = 6
};

static const int archs[] = {MOCK_NVRTC_ARCHS};
#define NARCHS ((int)(sizeof(archs) / sizeof(archs[0])))

struct prog {
	char *src, *name;
	char *ptx, *cubin, *log;
	size_t cubin_len;
	int real; /* compiled for sm_XX, not compute_XX */
};

static char *dup(const char *s) {
	size_t n = strlen(s) + 1;
	char *d = malloc(n);
	if (d != NULL) {
		memcpy(d, s, n);
	}
	return d;
}

EXPORT const char *nvrtcGetErrorString(nvrtcResult r) {
	static const char *names[] = {"NVRTC_SUCCESS",
	                              "NVRTC_ERROR_OUT_OF_MEMORY",
	                              "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
	                              "NVRTC_ERROR_INVALID_INPUT",
	                              "NVRTC_ERROR_INVALID_PROGRAM",
	                              "NVRTC_ERROR_INVALID_OPTION",
	                              "NVRTC_ERROR_COMPILATION"};
	if (r >= 0 && r < (int)(sizeof(names) / sizeof(names[0]))) {
		return names[r];
	}
	return "NVRTC_ERROR unknown";
}

EXPORT nvrtcResult nvrtcVersion(int *major, int *minor) {
	if (major == NULL || minor == NULL) {
		return NVRTC_ERROR_INVALID_INPUT;
	}
	*major = MOCK_NVRTC_MAJOR;
	*minor = MOCK_NVRTC_MINOR;
	return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcGetNumSupportedArchs(int *n) {
	if (n == NULL) {
		return NVRTC_ERROR_INVALID_INPUT;
	}
	*n = NARCHS;
	return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcGetSupportedArchs(int *out) {
	if (out == NULL) {
		return NVRTC_ERROR_INVALID_INPUT;
	}
	memcpy(out, archs, sizeof(archs));
	return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcCreateProgram(struct prog **p, const char *src, const char *name, int nheaders,
                                      const char *const *headers, const char *const *names) {
	(void)headers, (void)names;
	if (p == NULL || src == NULL || nheaders != 0) {
		return NVRTC_ERROR_INVALID_INPUT;
	}
	struct prog *g = calloc(1, sizeof(*g));
	if (g == NULL) {
		return NVRTC_ERROR_OUT_OF_MEMORY;
	}
	g->src = dup(src);
	g->name = dup(name != NULL ? name : "default_program");
	g->log = dup("");
	*p = g;
	return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcDestroyProgram(struct prog **p) {
	if (p == NULL || *p == NULL) {
		return NVRTC_ERROR_INVALID_PROGRAM;
	}
	struct prog *g = *p;
	free(g->src);
	free(g->name);
	free(g->ptx);
	free(g->cubin);
	free(g->log);
	free(g);
	*p = NULL;
	return NVRTC_SUCCESS;
}

static void set_log(struct prog *g, const char *msg) {
	free(g->log);
	g->log = dup(msg);
}

static int supported(int arch) {
	for (int i = 0; i < NARCHS; i++) {
		if (archs[i] == arch) {
			return 1;
		}
	}
	return 0;
}

/* parse_arch reads "sm_XX" or "compute_XX"; 0 when it is neither. */
static int parse_arch(const char *v, int *real) {
	const char *digits = NULL;
	if (strncmp(v, "sm_", 3) == 0) {
		*real = 1, digits = v + 3;
	} else if (strncmp(v, "compute_", 8) == 0) {
		*real = 0, digits = v + 8;
	} else {
		return 0;
	}
	char *end = NULL;
	long a = strtol(digits, &end, 10);
	return end != digits && *end == '\0' && a > 0 && a < 1000 ? (int)a : 0;
}

/* append adds text to the growing buffer *buf of *len bytes. */
static int append(char **buf, size_t *len, const char *text) {
	size_t n = strlen(text);
	char *b = realloc(*buf, *len + n + 1);
	if (b == NULL) {
		return 0;
	}
	memcpy(b + *len, text, n + 1);
	*buf = b;
	*len += n;
	return 1;
}

/* make_ptx writes the PTX of every extern "C" __global__ function in src. */
static char *make_ptx(const char *src, int arch) {
	char line[256];
	char *ptx = NULL;
	size_t len = 0;
	snprintf(line, sizeof line, ".version %d.%d\n.target sm_%d\n.address_size 64\n\n", MOCK_NVRTC_MAJOR - 4,
	         MOCK_NVRTC_MINOR, arch);
	if (!append(&ptx, &len, line)) {
		return NULL;
	}
	const char *key = "__global__ void ";
	for (const char *p = strstr(src, key); p != NULL; p = strstr(p + 1, key)) {
		const char *id = p + strlen(key);
		size_t n = 0;
		while ((id[n] >= 'a' && id[n] <= 'z') || (id[n] >= 'A' && id[n] <= 'Z') || (id[n] >= '0' && id[n] <= '9') ||
		       id[n] == '_') {
			n++;
		}
		if (n == 0 || n > 200) {
			continue;
		}
		snprintf(line, sizeof line, ".visible .entry %.*s()\n{\n\tret;\n}\n", (int)n, id);
		if (!append(&ptx, &len, line)) {
			free(ptx);
			return NULL;
		}
	}
	return ptx;
}

/* make_cubin wraps ptx in a 64-byte ELF64 header naming sm_arch. */
static char *make_cubin(const char *ptx, int arch, size_t *len) {
	size_t n = strlen(ptx) + 1;
	unsigned char *c = calloc(1, 64 + n);
	if (c == NULL) {
		return NULL;
	}
	memcpy(c, "\x7f" "ELF", 4);
	c[4] = 2; /* ELFCLASS64 */
	c[5] = 1; /* little-endian */
	c[6] = 1; /* EV_CURRENT */
	c[16] = 2; /* ET_EXEC */
	c[18] = 190; /* EM_CUDA, low byte */
	c[20] = 1;
	uint32_t flags = (uint32_t)arch;
	memcpy(c + 48, &flags, sizeof flags);
	c[52] = 64; /* e_ehsize */
	memcpy(c + 64, ptx, n);
	*len = 64 + n;
	return (char *)c;
}

EXPORT nvrtcResult nvrtcCompileProgram(struct prog *g, int nopts, const char *const *opts) {
	if (g == NULL) {
		return NVRTC_ERROR_INVALID_PROGRAM;
	}
	if (nopts < 0 || (nopts > 0 && opts == NULL)) {
		return NVRTC_ERROR_INVALID_INPUT;
	}
	char msg[512];
	int arch = archs[0], real = 0;
	for (int i = 0; i < nopts; i++) {
		const char *o = opts[i], *v = NULL;
		if (strncmp(o, "--gpu-architecture=", 19) == 0) {
			v = o + 19;
		} else if (strncmp(o, "-arch=", 6) == 0) {
			v = o + 6;
		} else if (o[0] != '-') {
			snprintf(msg, sizeof msg, "nvrtc: error: unrecognized option %s\n", o);
			set_log(g, msg);
			return NVRTC_ERROR_INVALID_OPTION;
		}
		if (v != NULL) {
			arch = parse_arch(v, &real);
			if (arch == 0 || !supported(arch)) {
				set_log(g, "nvrtc: error: invalid value for --gpu-architecture (-arch)\n");
				return NVRTC_ERROR_INVALID_OPTION;
			}
		}
	}
	const char *bad = strstr(g->src, "undefined_name");
	if (bad != NULL) {
		int lineno = 1;
		for (const char *p = g->src; p < bad; p++) {
			lineno += *p == '\n';
		}
		snprintf(msg, sizeof msg,
		         "%s(%d): error: identifier \"undefined_name\" is undefined\n\n1 error detected in the compilation of "
		         "\"%s\".\n",
		         g->name, lineno, g->name);
		set_log(g, msg);
		return NVRTC_ERROR_COMPILATION;
	}
	free(g->ptx);
	free(g->cubin);
	g->cubin = NULL;
	g->cubin_len = 0;
	g->real = real;
	g->ptx = make_ptx(g->src, arch);
	if (g->ptx == NULL) {
		return NVRTC_ERROR_OUT_OF_MEMORY;
	}
	if (real && (g->cubin = make_cubin(g->ptx, arch, &g->cubin_len)) == NULL) {
		return NVRTC_ERROR_OUT_OF_MEMORY;
	}
	set_log(g, "");
	return NVRTC_SUCCESS;
}

static nvrtcResult ptx_of(struct prog *g, const char **ptx) {
	if (g == NULL) {
		return NVRTC_ERROR_INVALID_PROGRAM;
	}
#ifdef MOCK_NVRTC_NO_PTX_FOR_SM
	if (g->real) {
		return NVRTC_ERROR_INVALID_PROGRAM;
	}
#endif
	if (g->ptx == NULL) {
		return NVRTC_ERROR_INVALID_PROGRAM;
	}
	*ptx = g->ptx;
	return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcGetPTXSize(struct prog *g, size_t *n) {
	const char *ptx;
	nvrtcResult r = ptx_of(g, &ptx);
	if (r == NVRTC_SUCCESS) {
		*n = strlen(ptx) + 1;
	}
	return r;
}

EXPORT nvrtcResult nvrtcGetPTX(struct prog *g, char *out) {
	const char *ptx;
	nvrtcResult r = ptx_of(g, &ptx);
	if (r == NVRTC_SUCCESS) {
		memcpy(out, ptx, strlen(ptx) + 1);
	}
	return r;
}

/* A compute_XX compilation has a CUBIN of size 0, as in NVRTC. */
EXPORT nvrtcResult nvrtcGetCUBINSize(struct prog *g, size_t *n) {
	if (g == NULL || g->ptx == NULL) {
		return NVRTC_ERROR_INVALID_PROGRAM;
	}
	*n = g->cubin_len;
	return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcGetCUBIN(struct prog *g, char *out) {
	if (g == NULL || g->ptx == NULL) {
		return NVRTC_ERROR_INVALID_PROGRAM;
	}
	if (g->cubin_len > 0) {
		memcpy(out, g->cubin, g->cubin_len);
	}
	return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcGetProgramLogSize(struct prog *g, size_t *n) {
	if (g == NULL) {
		return NVRTC_ERROR_INVALID_PROGRAM;
	}
	*n = strlen(g->log) + 1;
	return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcGetProgramLog(struct prog *g, char *out) {
	if (g == NULL) {
		return NVRTC_ERROR_INVALID_PROGRAM;
	}
	memcpy(out, g->log, strlen(g->log) + 1);
	return NVRTC_SUCCESS;
}
