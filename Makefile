# The two commands of the README. Both set everything up on a fresh machine first.
.PHONY: demo test bench docs figure setup build clean

demo:  ## run the main job: the pipeline on an embedded synthetic recording
	bash tools/demo.sh

test:  ## set up, build, lint, type-check and run every test (what CI runs)
	bash tools/test.sh

docs:  ## set up, build, and build the documentation (doc/) as HTML in doc/_build/html
	bash tools/docs.sh

figure:  ## the README's first picture from today's demo, as its report draws it
	bash tools/readme_figure.sh

bench:  ## set up, build and run the performance suite (ARGS=--quick for the short one)
	bash tools/bench.sh $(ARGS)

setup:
	bash tools/setup_venv.sh

build: setup
	bash tools/build.sh

clean:
	rm -rf build install log
