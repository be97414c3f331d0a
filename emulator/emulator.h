/* emulator/: the local Evaluator v2 cloud emulator (SPEC §7). */
#ifndef FPS_EMULATOR_H
#define FPS_EMULATOR_H

/* `failproofai-sidecar emulator [flags]`; returns the exit status. */
int emulator_main(int argc, char **argv);

#endif
