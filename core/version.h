/* version.h - the one place the version is written. */
#ifndef TALLY_VERSION_H
#define TALLY_VERSION_H

#define TALLY_VERSION "0.1.0"

#endif
