# SPDX-License-Identifier: MIT
# Included by each chapters/NN_x/Makefile, so that `make check` (and every other target) works
# from inside a chapter's folder: it is the top Makefile's target, for this chapter
# (`make check` here = `make check CH=NN` at the root). CH=... on the command line still wins.
TOP := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)
CH  := $(firstword $(subst _, ,$(notdir $(CURDIR))))
GOALS := $(or $(MAKECMDGOALS),check)
.DEFAULT_GOAL := check
.PHONY: $(GOALS)
Makefile $(TOP)/tools/chapter.mk: ;
# a failure already said its piece: no second "make: *** ... Error" line from here (see
# FAIL_QUIETLY in the top Makefile)
$(GOALS):
	@$(MAKE) --no-print-directory -C $(TOP) $@ CH=$(CH) || kill -PIPE $$PPID
