// main() for test binaries that run against one shared control plane.
#include <gtest/gtest.h>

#include "controlplane_env.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new ncclguard::testenv::ControlPlaneEnvironment);
  return RUN_ALL_TESTS();
}
