/* sandbox/jail: runs each evaluation in its own jailed child process. */
#ifndef FPS_JAIL_H
#define FPS_JAIL_H

/* argv[1] that makes the binary act as a sandbox child. */
#define SBX_CHILD_ARG "__sandbox-child"

/* Entry point of the child image; returns its exit status. */
int sbx_child_main(int argc, char **argv);

#endif
