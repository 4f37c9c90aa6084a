// SPDX-License-Identifier: MIT
/*
 * A main for a libFuzzer target without libFuzzer: runs
 * LLVMFuzzerTestOneInput on every file named, or in a directory named, so
 * that the seed corpus (and every crash kept there as a regression input)
 * runs in the gcc and ASan builds too.
 *   fuzz_X_replay FILE|DIR...
 * A target that can write its seed corpus (from traffic it makes itself)
 * defines fz_gen_seeds:
 *   fuzz_X_replay --gen DIR
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int fz_gen_seeds(const char *dir) __attribute__((weak));

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET)) {
		perror(path);
		return -1;
	}
	/* exactly n bytes, so that ASan sees a read past the input */
	buf = malloc(n ? (size_t)n : 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		perror(path);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned int runs = 0;

	if (argc == 3 && !strcmp(argv[1], "--gen")) {
		if (!fz_gen_seeds) {
			fprintf(stderr, "this target writes no seeds\n");
			return 2;
		}
		return fz_gen_seeds(argv[2]) ? 1 : 0;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;
		DIR *d;
		struct dirent *e;

		if (stat(argv[i], &st)) {
			perror(argv[i]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (run_file(argv[i]))
				return 1;
			runs++;
			continue;
		}
		d = opendir(argv[i]);
		if (!d) {
			perror(argv[i]);
			return 1;
		}
		while ((e = readdir(d))) {
			char path[4096];

			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i],
				 e->d_name);
			if (run_file(path))
				return 1;
			runs++;
		}
		closedir(d);
	}
	printf("%u inputs replayed, none failed\n", runs);
	return runs ? 0 : 1;
}
