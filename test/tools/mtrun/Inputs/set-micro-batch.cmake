# cmake -D IN=model.mtl -D OUT=variant.mtl -D MICRO_BATCH=n -P set-micro-batch.cmake
#
# Writes OUT: the model IN with its train block's micro_batch set to MICRO_BATCH. The
# expert-parallel tests' one-rank references are their models with micro-batches of B/ep
# (train-expert-parallel-*.test), made from the model itself so they cannot drift from it.
file(READ ${IN} text)
string(REGEX REPLACE "micro_batch [0-9]+" "micro_batch ${MICRO_BATCH}" variant "${text}")
if(variant STREQUAL text)
  message(FATAL_ERROR "${IN}: no micro_batch other than ${MICRO_BATCH} to set")
endif()
file(WRITE ${OUT} "${variant}")
