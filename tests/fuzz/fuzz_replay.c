/*
 * Replay driver for any fuzz target without libFuzzer (gcc, sanitizer builds): runs
 * LLVMFuzzerTestOneInput on every file named on the command line, descending into
 * directories. `--make-corpus DIR` writes the seed corpus instead. Options other
 * programs pass to libFuzzer targets (-foo=bar) are ignored.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	if (!f)
		return -1;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = (uint8_t *)malloc(n > 0 ? (size_t)n : 1);
	if (!buf || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
}

static int run_path(const char *path, int *count)
{
	struct stat st;
	DIR *d;
	struct dirent *e;
	int bad = 0;

	if (stat(path, &st) != 0)
		return 1;
	if (!S_ISDIR(st.st_mode)) {
		(*count)++;
		return run_file(path) != 0;
	}
	d = opendir(path);
	if (!d)
		return 1;
	while ((e = readdir(d)) != NULL) {
		char sub[4096];
		if (e->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
		bad += run_path(sub, count);
	}
	closedir(d);
	return bad;
}

int main(int argc, char **argv)
{
	int i, count = 0, bad = 0;

	if (argc == 3 && !strcmp(argv[1], "--make-corpus")) {
		int n = fuzz_make_corpus(argv[2]);
		printf("wrote %d corpus files to %s\n", n, argv[2]);
		return n > 0 ? 0 : 1;
	}
	for (i = 1; i < argc; i++) {
		if (argv[i][0] == '-')
			continue;
		bad += run_path(argv[i], &count);
	}
	printf("replayed %d inputs, %d unreadable\n", count, bad);
	return bad || count == 0 ? 1 : 0;
}
