# Every dependency comes from Debian through pkg-config; nothing is vendored.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
pkg_check_modules(LUA REQUIRED IMPORTED_TARGET lua5.4)
pkg_check_modules(LIBCONFIG REQUIRED IMPORTED_TARGET libconfig)
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)
pkg_check_modules(LIBCURL REQUIRED IMPORTED_TARGET libcurl)
pkg_check_modules(SQLITE REQUIRED IMPORTED_TARGET sqlite3)
# The fleet store (docs/runner.md, "Several boxes"): Debian libpq-dev.
pkg_check_modules(LIBPQ REQUIRED IMPORTED_TARGET libpq)
# The egress proxy (core/src/egress): libevent 2.1, Debian libevent-dev.
pkg_check_modules(LIBEVENT REQUIRED IMPORTED_TARGET libevent_core libevent_extra libevent_pthreads)
if(SBX_BUILD_TESTS)
  pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)   # 1.1.5: no cmocka:: target
endif()
