# Run by `cmake --install` (an install(CODE) of CMakeLists.txt): writes the
# files that name where vram is installed -- vram.pc and vramd.service --
# for the prefix of this install (--prefix P, else CMAKE_INSTALL_PREFIX),
# and installs them (DESTDIR applies). Written at configure time instead,
# they would name the configured prefix whatever --prefix said.
#
# In: VRAM_SOURCE_DIR, VRAM_WORK_DIR (where to write them), VRAM_VERSION,
# and VRAM_BINDIR, VRAM_LIBDIR, VRAM_INCLUDEDIR, VRAM_DATADIR, VRAM_DOCDIR,
# VRAM_UNITDIR as GNUInstallDirs gives them: relative to the prefix, or
# absolute.

set(VRAM_PREFIX "${CMAKE_INSTALL_PREFIX}")
foreach(dir BINDIR LIBDIR INCLUDEDIR DATADIR DOCDIR UNITDIR)
  if(IS_ABSOLUTE "${VRAM_${dir}}")
    set(VRAM_FULL_${dir} "${VRAM_${dir}}")
    set(VRAM_PC_${dir} "${VRAM_${dir}}")
  else()
    set(VRAM_FULL_${dir} "${VRAM_PREFIX}/${VRAM_${dir}}")
    set(VRAM_PC_${dir} "\${prefix}/${VRAM_${dir}}")
  endif()
endforeach()

configure_file("${VRAM_SOURCE_DIR}/cmake/vram.pc.in" "${VRAM_WORK_DIR}/vram.pc" @ONLY)
configure_file("${VRAM_SOURCE_DIR}/dist/vramd.service.in" "${VRAM_WORK_DIR}/vramd.service" @ONLY)
file(INSTALL "${VRAM_WORK_DIR}/vram.pc" DESTINATION "${VRAM_FULL_LIBDIR}/pkgconfig")
file(INSTALL "${VRAM_WORK_DIR}/vramd.service" DESTINATION "${VRAM_FULL_UNITDIR}")
