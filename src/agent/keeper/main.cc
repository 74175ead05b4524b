// trainyard-keeper: the task keeper as its own small program (agent/keeper.h).
// The agent starts it with the request on fd 3 and its failure pipe on fd 4.
#include "agent/keeper.h"

int main() { trainyard::agent::KeeperMain(3, 4); }
