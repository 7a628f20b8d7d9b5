# di_add_library(NAME SRCS ... DEPS ...): one static library per src/ folder. Dependencies are
# PUBLIC only where they appear in public headers; the target graph enforces the direction of
# dependencies written in docs/architecture.md.
function(di_add_library NAME)
  cmake_parse_arguments(A "" "" "SRCS;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${NAME} STATIC ${A_SRCS})
  target_include_directories(${NAME} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${NAME} PUBLIC ${A_DEPS} PRIVATE ${A_PRIVATE_DEPS})
endfunction()

# di_add_test(NAME SRCS ... DEPS ... [LABELS ...]): a GoogleTest binary registered with CTest.
function(di_add_test NAME)
  cmake_parse_arguments(A "" "" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${NAME} ${A_SRCS})
  target_link_libraries(${NAME} PRIVATE ${A_DEPS} GTest::gtest GTest::gtest_main)
  target_include_directories(${NAME} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_definitions(${NAME} PRIVATE DI_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data")
  gtest_discover_tests(${NAME} PROPERTIES LABELS "${A_LABELS}" DISCOVERY_TIMEOUT 60)
endfunction()
