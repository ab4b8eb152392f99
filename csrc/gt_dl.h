/*
 * gt_dl.h: a tiny run-time loader for the native libraries gotrain drives
 * (OpenBLAS, CUDA driver, cuBLAS, NCCL, NVRTC). Header only: every cgo
 * preamble that includes it gets its own static copy.
 *
 * Why the whole open (and its error text) happens inside one C call:
 * dlerror() state is per OS thread, and a goroutine may move to another OS
 * thread between two cgo calls. Reading dlerror() in the same C call that
 * failed is the only way to get the right message without locking threads.
 *
 * The path that actually loaded is read back with dlinfo(RTLD_DI_LINKMAP),
 * a GNU extension: build with -D_GNU_SOURCE (see README.md). Without it the
 * name that was passed to dlopen is recorded instead.
 */
#ifndef GT_DL_H
#define GT_DL_H

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#if defined(__GLIBC__) && defined(__USE_GNU)
#include <link.h>
#define GT_DL_HAVE_LINKMAP 1
#else
#define GT_DL_HAVE_LINKMAP 0
#endif

#define GT_DL_PATH_MAX 4096
#define GT_DL_ERR_MAX 4096

/* One loaded library. Zero it before the first gt_dl_open. */
typedef struct {
	void *handle;               /* NULL until a name loads */
	char path[GT_DL_PATH_MAX];  /* the file that loaded, or the name given */
	char err[GT_DL_ERR_MAX];    /* "name: dlerror; name: dlerror" of every failure */
} gt_dl_lib;

/* gt_dl_append_err appends "name: msg" to lib->err, separated by "; ",
 * truncating rather than overflowing. glibc's messages usually start with
 * the file name already; it is not repeated then. */
static inline void gt_dl_append_err(gt_dl_lib *lib, const char *name, const char *msg) {
	size_t used = strlen(lib->err);
	if (used + 1 >= sizeof(lib->err)) {
		return;
	}
	if (name == NULL) {
		name = "(null)";
	}
	if (msg == NULL) {
		msg = "unknown error";
	}
	size_t n = strlen(name);
	const char *sep = used ? "; " : "";
	if (strncmp(msg, name, n) == 0 && msg[n] == ':') {
		snprintf(lib->err + used, sizeof(lib->err) - used, "%s%s", sep, msg);
	} else {
		snprintf(lib->err + used, sizeof(lib->err) - used, "%s%s: %s", sep, name, msg);
	}
}

/* gt_dl_open tries names[0..count) in order with the given dlopen flags and
 * keeps the first that loads. Returns 0 on success, -1 when none loaded;
 * lib->err then lists every name with its dlerror() text. */
static inline int gt_dl_open(gt_dl_lib *lib, const char *const *names, int count, int flags) {
	lib->handle = NULL;
	lib->path[0] = '\0';
	lib->err[0] = '\0';
	for (int i = 0; i < count; i++) {
		dlerror();
		void *h = dlopen(names[i], flags);
		if (h == NULL) {
			gt_dl_append_err(lib, names[i], dlerror());
			continue;
		}
		lib->handle = h;
		snprintf(lib->path, sizeof(lib->path), "%s", names[i]);
#if GT_DL_HAVE_LINKMAP
		struct link_map *lm = NULL;
		if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm != NULL && lm->l_name != NULL && lm->l_name[0] != '\0') {
			snprintf(lib->path, sizeof(lib->path), "%s", lm->l_name);
		}
#endif
		return 0;
	}
	return -1;
}

/* gt_dl_sym resolves one symbol. A missing symbol returns NULL and appends
 * its dlerror() text to lib->err, so a caller can resolve a whole table and
 * report every missing name at once. */
static inline void *gt_dl_sym(gt_dl_lib *lib, const char *name) {
	if (lib->handle == NULL) {
		gt_dl_append_err(lib, name, "library not loaded");
		return NULL;
	}
	dlerror();
	void *p = dlsym(lib->handle, name);
	if (p == NULL) {
		const char *msg = dlerror();
		gt_dl_append_err(lib, name, msg ? msg : "symbol is NULL");
	}
	return p;
}

/* gt_dl_close drops the handle. Some libraries (OpenBLAS's thread pool, the
 * CUDA driver) must never be unloaded while the process runs; their callers
 * simply do not call this. */
static inline int gt_dl_close(gt_dl_lib *lib) {
	int rc = 0;
	if (lib->handle != NULL) {
		dlerror();
		rc = dlclose(lib->handle);
		if (rc != 0) {
			gt_dl_append_err(lib, lib->path, dlerror());
		}
		lib->handle = NULL;
	}
	return rc;
}

#endif /* GT_DL_H */
