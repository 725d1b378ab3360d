// The system zlib (zlib1g-dev on Debian/Ubuntu; part of the SDK on macOS): gzip of Expo request bodies and its
// inverse in the Expo emulator. No package dependency.
#include <zlib.h>
