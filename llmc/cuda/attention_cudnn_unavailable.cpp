// cuda/attention_cudnn_unavailable.cpp — attention_cudnn.h where the build has no cuDNN attention
// (no cudnn.h beside the CUDA headers, or no cudnn-frontend headers in third_party/): the trainer
// refuses --attention cudnn with the reason.
#include "cuda/attention_cudnn.h"

#include "utils.h"

namespace train_gpt {

bool cudnn_attention_available(std::string* why) {
    if (why != nullptr) {
        *why =
            "this build has no cuDNN attention (make found no cudnn.h in $(CUDA_HOME)/include or no cudnn-frontend "
            "headers in third_party/cudnn_frontend: scripts/setup.sh fetches them)";
    }
    return false;
}
void attention_forward_cudnn(void*, float*, const void*, int, int, int, int, DType, void*) {
    fail("--attention cudnn: this build has no cuDNN attention");
}
void attention_backward_cudnn(void*, const void*, const void*, const void*, const float*, int, int, int, int, DType,
                              void*) {
    fail("--attention cudnn: this build has no cuDNN attention");
}
void release_cudnn_attention() {}

}   // namespace train_gpt
