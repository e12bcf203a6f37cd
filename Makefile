# The two commands of the README. Both set everything up on a fresh machine first.
.PHONY: demo test setup build clean

demo:  ## run the main job: the pipeline on an embedded synthetic recording
	bash tools/demo.sh

test:  ## set up, build, lint, type-check and run every test (what CI runs)
	bash tools/test.sh

setup:
	bash tools/setup_venv.sh

build: setup
	bash tools/build.sh

clean:
	rm -rf build install log
