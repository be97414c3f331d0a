/* sidecar/commands: the subcommands of the failproofai-sidecar binary. Each
 * takes the arguments after its name and returns the process exit status
 * (0 ok, 1 runtime failure, 2 usage error). Only main() calls exit. */
#ifndef FPS_COMMANDS_H
#define FPS_COMMANDS_H

int cmd_run(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_backtest(int argc, char **argv);
/* emulator/ provides emulator_main (emulator/emulator.h). */

#endif
